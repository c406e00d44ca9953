// Taking a unix socket path for the watch API. A socket left by a process that died is removed;
// one that still answers belongs to a running kpng (or something else), and taking it would
// silently cut that server's clients off, so that is refused, naming the holder.

import { rm, stat } from "node:fs/promises";
import { connect } from "node:net";
import { dirname } from "node:path";
import { socketHolders } from "../observability/socket-holders.ts";
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
function answers(path: string): Promise<boolean> {
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
