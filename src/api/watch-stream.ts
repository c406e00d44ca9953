// The pull loop shared by localv1 and globalv1 streams: wait for a request, wait for something
// to send, write it while honouring backpressure (write() returning false means wait for
// 'drain'), and start again. A client that stops asking or stops reading holds no buffer here:
// what it missed is computed again, coalesced, from its last revision when it asks next.

import { once } from "node:events";
import type { ServerDuplexStream } from "@grpc/grpc-js";
import type { Logger } from "../observability/log.ts";
import type { Frame } from "./frames.ts";

export interface ChangeSet {
  readonly frames: readonly Frame[];
}

/** One stream's view of the state: what it has sent, and what to send next. */
export interface WatchSession<Req> {
  /** Resolves with the next change set (ending with its Sync), or undefined if the signal aborted. */
  next(request: Req, signal: AbortSignal): Promise<ChangeSet | undefined>;
  close(): void;
}

export function serveWatch<Req>(
  call: ServerDuplexStream<Req, Frame>,
  openSession: (firstRequest: Req) => WatchSession<Req>,
  log: Logger,
): void {
  const abort = new AbortController();
  const requests: Req[] = [];
  let wake: (() => void) | undefined;
  let ended = false;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  const stop = () => {
    abort.abort();
    notify();
  };
  call.on("data", (req: Req) => {
    requests.push(req);
    // A client never has more than one request outstanding in the protocol; keep only the last
    // if it sends more, so a misbehaving client cannot grow this queue.
    if (requests.length > 1) requests.splice(0, requests.length - 1);
    notify();
  });
  call.on("end", () => {
    ended = true;
    notify();
  });
  call.on("cancelled", stop);
  call.on("error", stop);
  call.on("close", stop);

  const loop = async () => {
    let session: WatchSession<Req> | undefined;
    try {
      for (;;) {
        while (requests.length === 0 && !ended && !abort.signal.aborted) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
        }
        const req = requests.shift();
        if (req === undefined || abort.signal.aborted) break;
        session ??= openSession(req);
        const changeSet = await session.next(req, abort.signal);
        if (changeSet === undefined) break;
        for (const frame of changeSet.frames) {
          if (abort.signal.aborted) break;
          if (!call.write(frame)) await once(call, "drain", { signal: abort.signal });
        }
      }
      if (!abort.signal.aborted) call.end();
    } catch (err) {
      if (!abort.signal.aborted) {
        log.warn({ err }, "watch stream failed");
        call.destroy(err instanceof Error ? err : new Error(String(err)));
      }
    } finally {
      session?.close();
    }
  };
  void loop();
}

/** Resolves when `ready()` is true, re-checking after each event of `subscribe`; false if aborted. */
export async function waitFor(
  ready: () => boolean,
  subscribe: (listener: () => void) => () => void,
  signal: AbortSignal,
): Promise<boolean> {
  while (!ready()) {
    if (signal.aborted) return false;
    await new Promise<void>((resolve) => {
      const done = () => {
        unsubscribe();
        signal.removeEventListener("abort", done);
        resolve();
      };
      const unsubscribe = subscribe(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }
  return !signal.aborted;
}
