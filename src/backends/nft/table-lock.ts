// One nft backend per table. Two backends on one table would undo each other's changes (each
// trusts its own mirror), so the second refuses to start. The lock is an abstract unix socket
// named after the table: abstract sockets live in the network namespace, exactly as nft tables
// do, and the kernel releases one when its process dies, so a crash leaves no stale lock.

import { createServer, type Server } from "node:net";
import { socketHolders } from "../../observability/socket-holders.ts";
import { UsageError } from "../../plugin/usage-error.ts";

interface TableLock {
  release(): Promise<void>;
}

/** The abstract socket name for a table (a leading NUL makes it abstract). */
function lockName(table: string): string {
  return `\0kpng-nft-table-${table}`;
}

/** Takes the table's lock, or throws a UsageError naming the process that holds it. */
export async function acquireTableLock(table: string): Promise<TableLock> {
  const name = lockName(table);
  const server: Server = createServer((socket) => socket.destroy());
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ path: name }, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    const holders = await socketHolders(name);
    const who = holders.length > 0 ? ` (pid ${holders.map((h) => `${h.pid}: ${h.command}`).join(", ")})` : "";
    throw new UsageError(
      `another nft backend is already programming table "${table}" in this network namespace${who}; ` +
        "stop it, or give this one another --table-name",
    );
  }
  // The lock must not keep the process alive on its own.
  server.unref();
  return { release: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
