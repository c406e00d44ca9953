// The last line of defence against leaked namespaces and processes: whatever is still registered
// when the process exits (normally, by an uncaught error, or by SIGINT/SIGTERM/SIGHUP) is killed
// and deleted synchronously. Regular cleanup (Topology.destroy) unregisters things as it goes, so
// this only acts when a test or the demo could not clean up itself.
//
// The registry is process-wide on purpose: an exit handler can only see module state.

import { type ChildProcess, spawnSync } from "node:child_process";

const namespaces = new Set<string>();
const processes = new Set<ChildProcess>();
let installed = false;

const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
const SIGNAL_NUMBERS: Record<(typeof SIGNALS)[number], number> = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 };

export function trackNamespace(name: string): void {
  install();
  namespaces.add(name);
}

export function untrackNamespace(name: string): void {
  namespaces.delete(name);
}

export function trackProcess(child: ChildProcess): void {
  install();
  processes.add(child);
  child.once("exit", () => processes.delete(child));
}

/** Kills the processes of a namespace, then deletes it; synchronous so it works in exit handlers. */
export function deleteNamespaceSync(name: string): void {
  const pids = spawnSync("ip", ["netns", "pids", name], { encoding: "utf8" });
  for (const pid of (pids.stdout ?? "").split("\n").filter((p) => /^\d+$/.test(p))) {
    try {
      process.kill(Number(pid), "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  spawnSync("ip", ["netns", "del", name], { stdio: "ignore" });
}

function cleanupSync(): void {
  for (const child of processes) child.kill("SIGKILL");
  processes.clear();
  for (const name of namespaces) deleteNamespaceSync(name);
  namespaces.clear();
}

function install(): void {
  if (installed) return;
  installed = true;
  process.once("exit", cleanupSync);
  for (const signal of SIGNALS) {
    process.once(signal, () => {
      cleanupSync();
      process.exit(128 + SIGNAL_NUMBERS[signal]);
    });
  }
}
