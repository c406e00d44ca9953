// A bpffs and a cgroup v2 tree of the test's own under /run (`ip netns exec` remounts /sys, so
// nothing under /sys/fs is visible inside a namespace). The eBPF backend pins under `bpfRoot` and
// attaches to `clients`, a child group: only processes that join it (node-local clients, pods)
// are balanced, while everything else on the machine, and the "external" client, stays outside.

import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCommand } from "./exec.ts";

export interface BpfMounts {
  readonly bpfRoot: string;
  /** The child cgroup the programs attach to and clients join. */
  readonly clients: string;
  destroy(): Promise<void>;
}

let created = 0;

/** Pins a small map of another program at `path` (inside `ns`): what kpng's cleanup must leave. */
export async function pinForeignMap(ns: { exec(argv: readonly string[]): Promise<unknown> }, path: string) {
  const spec = ["type", "hash", "key", "4", "value", "4", "entries", "4", "name", "other"];
  await ns.exec(["bpftool", "map", "create", path, ...spec]);
}

export async function mountBpf(): Promise<BpfMounts> {
  created += 1;
  const base = `/run/kpng-bpf-${process.pid}-${created}`;
  const bpfRoot = join(base, "bpf");
  const cgroup = join(base, "cgroup");
  mkdirSync(bpfRoot, { recursive: true });
  mkdirSync(cgroup, { recursive: true });
  await runCommand(["mount", "-t", "bpf", "bpf", bpfRoot]);
  await runCommand(["mount", "-t", "cgroup2", "none", cgroup]);
  const clients = join(cgroup, `kpng-test-${process.pid}-${created}`);
  mkdirSync(clients, { recursive: true });
  return {
    bpfRoot,
    clients,
    async destroy() {
      // Anything still in the group moves to the root; an empty group can be removed.
      const left = readFileSync(join(clients, "cgroup.procs"), "utf8").split("\n").filter(Boolean);
      for (const pid of left) {
        try {
          writeFileSync(join(cgroup, "cgroup.procs"), pid);
        } catch {
          // gone already
        }
      }
      rmdirSync(clients);
      await runCommand(["umount", cgroup]);
      await runCommand(["umount", "-l", bpfRoot]);
      // Plain rmdir: never a recursive delete where a mount might still be.
      for (const dir of [cgroup, bpfRoot, base]) rmdirSync(dir);
    },
  };
}
