// Network namespaces for tests and the demo, driven through iproute2. Every namespace is named
// `<prefix>-<pid>-<n>` so a janitor can tell which ones belong to a process that has died.

import { isIP } from "node:net";
import { type CommandResult, type RunOptions, runCommand } from "./exec.ts";
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from "./safety-net.ts";
import { Spawned, type SpawnOptions } from "./spawned.ts";

export const NAMESPACE_PREFIX = "kpt";

/** Matches the names this module creates and captures the owning pid. */
const OWNED_NAME = new RegExp(`^${NAMESPACE_PREFIX}-(\\d+)-\\d+$`);

/** Interface names: the kernel allows at most 15 bytes (IFNAMSIZ - 1). */
const INTERFACE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;

let created = 0;

export class Netns {
  readonly name: string;
  readonly #spawned = new Set<Spawned>();
  #deleted = false;

  private constructor(name: string) {
    this.name = name;
  }

  /** Creates a fresh namespace with `lo` up, registered for deletion at process exit. */
  static async create(): Promise<Netns> {
    created += 1;
    const name = `${NAMESPACE_PREFIX}-${process.pid}-${created}`;
    trackNamespace(name);
    await runCommand(["ip", "netns", "add", name]);
    const ns = new Netns(name);
    await ns.ip(["link", "set", "lo", "up"]);
    return ns;
  }

  /** Runs argv inside the namespace (`ip netns exec`) and resolves when it exits. */
  exec(argv: readonly string[], opts?: RunOptions): Promise<CommandResult> {
    return runCommand(["ip", "netns", "exec", this.name, ...argv], opts);
  }

  /** Runs `ip -n <ns> <args>`. */
  ip(args: readonly string[], opts?: RunOptions): Promise<CommandResult> {
    return runCommand(["ip", "-n", this.name, ...args], opts);
  }

  /** Runs several `ip` commands in one process (`ip -batch -`, commands on stdin). */
  async ipBatch(commands: readonly (readonly string[])[]): Promise<void> {
    if (commands.length === 0) return;
    for (const words of commands) {
      for (const w of words) {
        // ip's batch parser splits on whitespace and treats quotes and '#' specially.
        if (!/^[A-Za-z0-9_.:/-]+$/.test(w)) throw new Error(`ipBatch: unsafe word ${JSON.stringify(w)}`);
      }
    }
    await runCommand(["ip", "-n", this.name, "-batch", "-"], {
      stdin: `${commands.map((c) => c.join(" ")).join("\n")}\n`,
    });
  }

  /** Sets sysctls inside the namespace, e.g. {"net.ipv4.ip_forward": "1"}. */
  async sysctl(settings: Readonly<Record<string, string>>): Promise<void> {
    const args = Object.entries(settings).map(([key, value]) => {
      if (!/^[a-z0-9_.]+$/.test(key) || !/^[0-9a-z]+$/.test(value)) {
        throw new Error(`sysctl: unexpected ${key}=${value}`);
      }
      return `${key}=${value}`;
    });
    await this.exec(["sysctl", "-q", "-w", ...args]);
  }

  /** Adds an address (IPv4 or IPv6, with or without a prefix); IPv6 gets `nodad`. */
  async addAddress(device: string, cidr: string): Promise<void> {
    checkInterfaceName(device);
    const [ip] = cidr.split("/");
    const family = isIP(ip ?? "");
    if (family === 0) throw new Error(`not an IP address: ${cidr}`);
    await this.ip(["addr", "add", cidr, "dev", device, ...(family === 6 ? ["nodad"] : [])]);
  }

  /**
   * Spawns a long-running process inside the namespace. The returned handle keeps its output
   * and is stopped by destroy() if still running.
   */
  spawn(argv: readonly string[], opts: SpawnOptions = {}): Spawned {
    const child = new Spawned(["ip", "netns", "exec", this.name, ...argv], {
      name: `${opts.name ?? argv[0]} in ${this.name}`,
      ...(opts.stdin === undefined ? {} : { stdin: opts.stdin }),
      ...(opts.env === undefined ? {} : { env: opts.env }),
      ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
    });
    this.#spawned.add(child);
    void child.exited.then(() => this.#spawned.delete(child));
    return child;
  }

  /** Pids of every process whose network namespace this is. */
  async pids(): Promise<number[]> {
    const { stdout } = await runCommand(["ip", "netns", "pids", this.name]);
    return stdout
      .split("\n")
      .filter((p) => /^\d+$/.test(p))
      .map(Number);
  }

  /**
   * Stops processes spawned here (SIGTERM, then SIGKILL), kills anything else left inside, and
   * deletes the namespace with its interfaces. Safe to call twice.
   */
  async destroy(): Promise<void> {
    if (this.#deleted) return;
    this.#deleted = true;
    await Promise.all([...this.#spawned].map((p) => p.stop(1_000)));
    deleteNamespaceSync(this.name);
    untrackNamespace(this.name);
  }
}

export interface VethEnd {
  readonly ns: Netns;
  readonly name: string;
}

/** Creates a veth pair with each end directly inside its namespace, and brings both up. */
export async function createVethPair(a: VethEnd, b: VethEnd): Promise<void> {
  checkInterfaceName(a.name);
  checkInterfaceName(b.name);
  await runCommand([
    "ip",
    "link",
    "add",
    a.name,
    "netns",
    a.ns.name,
    "type",
    "veth",
    "peer",
    "name",
    b.name,
    "netns",
    b.ns.name,
  ]);
  await Promise.all([a.ns.ip(["link", "set", a.name, "up"]), b.ns.ip(["link", "set", b.name, "up"])]);
}

/**
 * Deletes namespaces named by this module whose owning process no longer runs (left behind by a
 * test run that was killed). Returns the names it deleted.
 */
export async function removeLeftoverNamespaces(): Promise<string[]> {
  const { stdout } = await runCommand(["ip", "netns", "list"]);
  const removed: string[] = [];
  for (const line of stdout.split("\n")) {
    const name = line.split(" ")[0] ?? "";
    const owner = OWNED_NAME.exec(name)?.[1];
    if (owner === undefined || processAlive(Number(owner))) continue;
    deleteNamespaceSync(name);
    removed.push(name);
  }
  return removed;
}

/** Names of existing namespaces created by this process. */
export async function ownNamespaces(): Promise<string[]> {
  const { stdout } = await runCommand(["ip", "netns", "list"]);
  return stdout
    .split("\n")
    .map((line) => line.split(" ")[0] ?? "")
    .filter((name) => OWNED_NAME.exec(name)?.[1] === String(process.pid));
}

/**
 * Why network namespaces cannot be used here, or undefined when they can (root, and a probe
 * namespace can be created and deleted).
 */
export async function netnsUnavailableReason(): Promise<string | undefined> {
  if (process.platform !== "linux") return "network namespaces need Linux";
  if (process.getuid?.() !== 0) return "network namespaces need root";
  try {
    const probe = await Netns.create();
    await probe.destroy();
    return undefined;
  } catch (err) {
    return `ip netns does not work here: ${err instanceof Error ? err.message : String(err)}`;
  }
}

function checkInterfaceName(name: string): void {
  if (!INTERFACE_NAME.test(name)) throw new Error(`invalid interface name ${JSON.stringify(name)}`);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
