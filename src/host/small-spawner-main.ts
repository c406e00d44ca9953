// The small process behind SmallSpawner (small-spawner.ts): it runs the commands its parent sends
// over the IPC channel with execCommand (deadline, process group, niceness) and sends each
// result back. Starting a process forks the caller, and the fork copies the caller's page tables:
// cheap from this small process, a blocked event loop in proportion to its memory from a proxy
// holding 100k Services (docs/performance.md). When the parent goes, so does this process, and
// the commands it still runs are killed with it (exec.ts kills them on exit); should this
// process die first, the parent kills them (each command's process group is sent to it).

import { closeSync, openSync } from "node:fs";
import { execCommand } from "./exec.ts";
import type { SpawnRequest, SpawnResponse } from "./small-spawner.ts";

const send = (response: SpawnResponse) => process.send?.(response);

process.on("message", (request: SpawnRequest) => {
  let stdoutFd: number | undefined;
  try {
    // A file of kpng's private directory that must not exist yet: nothing else is written to.
    if (request.stdoutFile !== undefined) stdoutFd = openSync(request.stdoutFile, "wx", 0o600);
  } catch (err) {
    send({ id: request.id, error: `cannot create ${request.stdoutFile}: ${(err as Error).message}` });
    return;
  }
  execCommand(request.argv, {
    timeoutMs: request.timeoutMs,
    // Its process group, for the parent to kill should this process die first.
    track: {
      add: (child) => {
        if (child.pid !== undefined) send({ id: request.id, started: child.pid });
      },
      delete: () => {},
    },
    // Counted by the parent, whose metrics are served.
    onSpawnFailure: (code) => send({ id: request.id, spawnFailure: code }),
    ...(request.niceness === undefined ? {} : { niceness: request.niceness }),
    ...(stdoutFd === undefined ? {} : { stdoutFd }),
  })
    .finally(() => {
      if (stdoutFd !== undefined) closeSync(stdoutFd);
    })
    .then(
      (result) => send({ id: request.id, result }),
      (err: unknown) => send({ id: request.id, error: err instanceof Error ? err.message : String(err) }),
    );
});
process.on("disconnect", () => process.exit(0));
