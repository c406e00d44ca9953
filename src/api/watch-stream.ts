// The pull loop shared by localv1 and globalv1 streams: wait for a request, wait for something
// to send, write it while honouring backpressure (write() returning false means wait for
// 'drain'), and start again. A client that stops asking or stops reading holds no buffer here:
// what it missed is computed again, coalesced, from its last revision when it asks next.

import type { Logger } from "../observability/log.ts";
import { RepeatLimiter } from "../observability/repeat-limiter.ts";
import type { Frame } from "./frames.ts";
import { type GrpcServerCall, GrpcStatus } from "./grpc-stream.ts";
import { StreamRejection } from "./stream-rejection.ts";

export interface ChangeSet {
  readonly frames: readonly Frame[];
}

/** One stream's view of the state: what it has sent, and what to send next. */
export interface WatchSession<Req> {
  /** Resolves with the next change set (ending with its Sync), or undefined if the signal aborted. */
  next(request: Req, signal: AbortSignal): Promise<ChangeSet | undefined>;
  close(): void;
}

/** Refusals repeat in bursts (a client retrying, a cap reached): the same reason is logged sparsely. */
const refusals = new RepeatLimiter();

/**
 * `report`: takes a request that only reports something (localv1's Programmed) and returns
 * true; such a request is no request for the next change set.
 */
export function serveWatch<Req>(
  call: GrpcServerCall<Req>,
  openSession: (firstRequest: Req) => WatchSession<Req>,
  log: Logger,
  report?: (req: Req) => boolean,
): void {
  const abort = new AbortController();
  let request: Req | undefined;
  let wake: (() => void) | undefined;
  let ended = false;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  // A client never has more than one request outstanding in the protocol; keep only the last if
  // it sends more, so a misbehaving client cannot grow a queue.
  call.onRequest((req) => {
    if (report?.(req) === true) return;
    request = req;
    notify();
  });
  call.onEnd(() => {
    ended = true;
    notify();
  });
  call.onClose(() => {
    abort.abort();
    notify();
  });

  const loop = async () => {
    let session: WatchSession<Req> | undefined;
    try {
      for (;;) {
        while (request === undefined && !ended && !abort.signal.aborted) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
        }
        const req = request;
        request = undefined;
        if (req === undefined || abort.signal.aborted) break;
        session ??= openSession(req);
        const changeSet = await session.next(req, abort.signal);
        if (changeSet === undefined) break;
        await call.write(changeSet.frames, abort.signal);
      }
      if (!abort.signal.aborted) call.finish();
    } catch (err) {
      if (err instanceof StreamRejection) {
        // One line per refusal was 1,000 lines in 5 ms under a burst: repeats are logged sparsely.
        const d = refusals.hit(err.message);
        if (d.log)
          log.warn(
            { reason: err.message, count: d.count, suppressed: d.suppressed },
            "watch request refused",
          );
        if (!abort.signal.aborted) call.finish(err.status, err.message);
      } else if (!abort.signal.aborted) {
        log.warn({ err }, "watch stream failed");
        call.finish(GrpcStatus.INTERNAL, err instanceof Error ? err.message : String(err));
      }
    } finally {
      session?.close();
    }
  };
  void loop();
}

/**
 * One abort listener per signal, whatever the number of waits on it: a stream waits once per
 * change, and adding and removing an EventTarget listener each time was a measurable part of a
 * change fanned out to 1,000 streams.
 */
const abortWaiters = new WeakMap<AbortSignal, Set<() => void>>();

function onAbort(signal: AbortSignal, listener: () => void): () => void {
  let waiters = abortWaiters.get(signal);
  if (waiters === undefined) {
    const set = new Set<() => void>();
    waiters = set;
    abortWaiters.set(signal, set);
    signal.addEventListener(
      "abort",
      () => {
        for (const waiter of [...set]) waiter();
      },
      { once: true },
    );
  }
  const set = waiters;
  set.add(listener);
  return () => set.delete(listener);
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
        stopAbort();
        resolve();
      };
      const unsubscribe = subscribe(done);
      const stopAbort = onAbort(signal, done);
    });
  }
  return !signal.aborted;
}
