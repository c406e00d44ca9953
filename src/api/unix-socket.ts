// Taking a unix socket path for the watch API. A socket left by a process that died is removed;
// one that still answers belongs to a running kpng (or something else), and taking it would
// silently cut that server's clients off, so that is refused, naming the holder.

import { readdir, readFile, readlink, rm, stat } from "node:fs/promises";
import { connect } from "node:net";
import { dirname } from "node:path";
import { UsageError } from "../plugin/usage-error.ts";

/** How long a connection attempt to an existing socket may take before it counts as stale. */
const PROBE_TIMEOUT_MS = 1000;

/** Makes `path` free to listen on, or throws a message saying why it cannot be. */
export async function claimUnixSocket(path: string): Promise<void> {
  const where = `--listen unix://${path}`;
  const dir = dirname(path);
  const dirInfo = await stat(dir).catch((err: NodeJS.ErrnoException) => err);
  if (dirInfo instanceof Error) {
    if (dirInfo.code === "ENOENT")
      throw new Error(`${where}: the directory ${dir} does not exist; create it first`);
    throw new Error(`${where}: cannot use the directory ${dir}: ${dirInfo.message}`);
  }
  if (!dirInfo.isDirectory()) throw new Error(`${where}: ${dir} is not a directory`);
  const info = await stat(path).catch(() => undefined);
  if (info === undefined) return;
  if (!info.isSocket()) throw new Error(`${where}: exists and is not a socket`);
  if (await answers(path)) {
    const holders = await socketHolders(path);
    const who =
      holders.length > 0
        ? `held by ${holders.map((h) => `pid ${h.pid} (${h.command})`).join(", ")}`
        : "in use";
    throw new UsageError(`${where}: the socket is ${who}; stop that process or choose another path`);
  }
  await rm(path);
}

/** Whether something accepts connections on the socket. */
export function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    const done = (alive: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(alive);
    };
    const timer = setTimeout(() => done(false), PROBE_TIMEOUT_MS);
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

export interface SocketHolder {
  readonly pid: number;
  readonly command: string;
}

/** The processes with the listening socket at `path` open (Linux /proc; empty when unknown). */
export async function socketHolders(path: string): Promise<SocketHolder[]> {
  try {
    const table = await readFile("/proc/net/unix", "utf8");
    const inodes = new Set<string>();
    for (const line of table.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[7] === path && fields[6] !== undefined) inodes.add(fields[6]);
    }
    if (inodes.size === 0) return [];
    const holders: SocketHolder[] = [];
    for (const entry of await readdir("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      const fds = await readdir(`/proc/${entry}/fd`).catch(() => [] as string[]);
      for (const fd of fds) {
        const target = await readlink(`/proc/${entry}/fd/${fd}`).catch(() => "");
        const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
        if (inode !== undefined && inodes.has(inode)) {
          const command = (await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => ""))
            .split("\0")
            .filter((a) => a !== "")
            .join(" ")
            .slice(0, 200);
          holders.push({ pid: Number(entry), command });
          break;
        }
      }
    }
    return holders;
  } catch {
    return [];
  }
}
