// Who holds a unix socket: the processes with the listening socket open, read from Linux /proc.
// Used to say "held by pid N (command)" when kpng refuses to take a socket or a lock another
// process holds.

import { readdir, readFile, readlink } from "node:fs/promises";

interface SocketHolder {
  readonly pid: number;
  readonly command: string;
}

/**
 * The processes with the listening socket at `path` open (empty when unknown). An abstract
 * socket is named with a leading NUL, which /proc/net/unix shows as "@".
 */
export async function socketHolders(path: string): Promise<SocketHolder[]> {
  try {
    const shown = path.startsWith("\0") ? `@${path.slice(1)}` : path;
    const table = await readFile("/proc/net/unix", "utf8");
    const inodes = new Set<string>();
    for (const line of table.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[7] === shown && fields[6] !== undefined) inodes.add(fields[6]);
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
