// A watch client for the localv1 and globalv1 APIs: one stream, one request per change set,
// reconnecting with jittered exponential backoff, and resuming (instance id + revision of the
// last applied change set) so a reconnect costs only what changed meanwhile.

import * as grpc from "@grpc/grpc-js";
import { GlobalWatchReq } from "../api/gen/api/globalv1/api.ts";
import { OpItem, WatchReq, type Set as WireSet } from "../api/gen/api/localv1/api.ts";
import { Backoff } from "../lib/backoff.ts";
import { sleep } from "../lib/sleep.ts";
import { type Logger, silentLogger } from "../observability/log.ts";
import { clientCredentials, dialTarget, type TlsPaths } from "./connection.ts";
import type { SyncReport, SyncReporter } from "./sync-reports.ts";

export type WireOp =
  | { readonly op: "set"; readonly set: WireSet; readonly path: string; readonly bytes: Uint8Array }
  | { readonly op: "delete"; readonly set: WireSet; readonly path: string };

export interface WireChangeSet {
  /** The ops replace everything held so far (Reset was received). */
  readonly reset: boolean;
  readonly ops: readonly WireOp[];
  readonly instanceId: string;
  readonly revision: number;
}

interface Resume {
  readonly instanceId: string;
  readonly revision: number;
}

interface WatchOptions {
  /** --api: "unix:///path", "tcp://host:port" or "host:port". */
  readonly api: string;
  readonly tls?: TlsPaths;
  /**
   * Called with each complete change set. The next one is only requested once this resolves,
   * so a slow consumer gets fewer, larger change sets rather than a queue.
   */
  readonly onChangeSet: (changeSet: WireChangeSet) => void | Promise<void>;
  readonly signal: AbortSignal;
  readonly log?: Logger;
  /** Start from a known state (e.g. one kept across restarts). */
  readonly resume?: Resume;
  readonly backoff?: { readonly initialMs?: number; readonly maxMs?: number };
  /** Called when a stream breaks, before the backoff. */
  readonly onDisconnect?: (err: Error) => void;
  /** localv1: the backend's sync reports, sent on streams whose server reads them. */
  readonly syncReports?: SyncReporter;
  /** Timing, injectable for tests: the backoff wait and the jitter source (0 ≤ x < 1). */
  readonly timing?: {
    readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
    readonly random?: () => number;
  };
}

interface Protocol<Req> {
  readonly path: string;
  readonly request: (resume: Resume | undefined) => Req;
  readonly encode: (req: Req) => Buffer;
  /** A request that only carries a sync report (localv1). */
  readonly report?: (report: SyncReport) => Req;
}

function localProtocol(
  nodeName: string,
  serviceProxyName: string | undefined,
  reporter: SyncReporter | undefined,
): Protocol<WatchReq> {
  return {
    path: "/localv1.Sets/Watch",
    // Every request names the proxy name, so a resume after a reconnect is for the same one.
    request: (r) => ({
      NodeName: nodeName,
      ServiceProxyName: serviceProxyName,
      InstanceID: r?.instanceId ?? "",
      Revision: r?.revision ?? 0,
      ...(reporter?.reporting === true ? { ReportsProgrammed: true } : {}),
    }),
    encode: (req) => Buffer.from(WatchReq.encode(req).finish()),
    report: (r) => ({
      NodeName: nodeName,
      ServiceProxyName: serviceProxyName,
      InstanceID: "",
      Revision: 0,
      Programmed: { InstanceID: r.instanceId, Revision: r.revision, Families: [...r.families] },
    }),
  };
}

function globalProtocol(): Protocol<GlobalWatchReq> {
  return {
    path: "/globalv1.Sets/Watch",
    request: (r) => ({ InstanceID: r?.instanceId ?? "", Revision: r?.revision ?? 0, FullObjects: true }),
    encode: (req) => Buffer.from(GlobalWatchReq.encode(req).finish()),
  };
}

/**
 * Watches one node's local state until the signal aborts: the Services of `serviceProxyName`
 * ("" the unlabelled ones), or of the server's own name when undefined.
 */
export function watchLocal(
  nodeName: string,
  options: WatchOptions,
  serviceProxyName?: string,
): Promise<void> {
  return watchLoop(localProtocol(nodeName, serviceProxyName, options.syncReports), options);
}

/** Watches the global state (whole objects) until the signal aborts. */
export function watchGlobal(options: WatchOptions): Promise<void> {
  return watchLoop(globalProtocol(), options);
}

/**
 * The HTTP/2 flow-control window a watch client offers, per stream and per connection. A first
 * full state runs to megabytes; with HTTP/2's default window the server stops at every window's
 * end until the client's update arrives, an event-loop turn and a write on both ends each time
 * (gRPC's Go clients grow their window by estimating the bandwidth, for the same reason). The
 * client reads as fast as it decodes, so at most this much waits unread.
 */
export const WATCH_FLOW_CONTROL_WINDOW = 8 * 1024 * 1024;

async function watchLoop<Req>(protocol: Protocol<Req>, options: WatchOptions): Promise<void> {
  const log = options.log ?? silentLogger;
  const initialMs = options.backoff?.initialMs ?? 500;
  const maxMs = options.backoff?.maxMs ?? 30_000;
  const wait = options.timing?.sleep ?? sleep;
  const random = options.timing?.random ?? Math.random;
  const client = new grpc.Client(dialTarget(options.api), clientCredentials(options.tls), {
    "grpc.keepalive_time_ms": 30_000,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
    "grpc-node.flow_control_window": WATCH_FLOW_CONTROL_WINDOW,
    // The channel's own reconnect backoff must not outlast ours.
    "grpc.initial_reconnect_backoff_ms": initialMs,
    "grpc.max_reconnect_backoff_ms": maxMs,
  });
  let resume = options.resume;
  // Jitter: many nodes reconnecting to a restarted brain spread out.
  const backoff = new Backoff({ initialMs, maxMs, jitter: 0.5, random });
  try {
    while (!options.signal.aborted) {
      const progressed = { value: false };
      try {
        await oneStream(client, protocol, options, resume, (r) => {
          resume = r;
          progressed.value = true;
        });
      } catch (err) {
        if (options.signal.aborted) break;
        options.onDisconnect?.(err as Error);
        if (progressed.value) backoff.reset();
        const ms = backoff.next();
        log.warn({ err: (err as Error).message, retryInMs: ms }, "watch stream broken; reconnecting");
        await wait(ms, options.signal);
      }
    }
  } finally {
    client.close();
  }
}

function oneStream<Req>(
  client: grpc.Client,
  protocol: Protocol<Req>,
  options: WatchOptions,
  resume: Resume | undefined,
  applied: (resume: Resume) => void,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const call = client.makeBidiStreamRequest<Req, OpItem>(
      protocol.path,
      protocol.encode,
      (b: Buffer) => OpItem.decode(b),
      new grpc.Metadata(),
      {},
    );
    const onAbort = () => call.cancel();
    options.signal.addEventListener("abort", onAbort, { once: true });
    let reset = false;
    let ops: WireOp[] = [];
    let failed = false;
    const reporter = protocol.report === undefined ? undefined : options.syncReports;
    let sendReport: ((report: SyncReport) => void) | undefined;
    const fail = (err: Error) => {
      if (failed) return;
      failed = true;
      if (sendReport !== undefined) reporter?.detach(sendReport);
      options.signal.removeEventListener("abort", onAbort);
      call.cancel();
      if (options.signal.aborted) resolve();
      else reject(err);
    };
    call.on("data", (item: OpItem) => {
      const op = item.Op;
      switch (op?.$case) {
        case "Reset":
          reset = true;
          ops = [];
          break;
        case "Set":
          if (op.value.Ref !== undefined) {
            ops.push({ op: "set", set: op.value.Ref.Set, path: op.value.Ref.Path, bytes: op.value.Bytes });
          }
          break;
        case "Delete":
          ops.push({ op: "delete", set: op.value.Set, path: op.value.Path });
          break;
        case "Sync": {
          const changeSet: WireChangeSet = {
            reset,
            ops,
            instanceId: op.value.InstanceID,
            revision: op.value.Revision,
          };
          reset = false;
          ops = [];
          // Only a server that says it reads reports gets any: to one that predates them, a
          // report would be a request for the next change set.
          if (op.value.ReadsProgrammed && reporter !== undefined && sendReport === undefined) {
            const toRequest = protocol.report!;
            sendReport = (report) => call.write(toRequest(report));
            reporter.attach(sendReport);
          }
          call.pause();
          Promise.resolve()
            .then(() => options.onChangeSet(changeSet))
            .then(() => {
              if (changeSet.instanceId !== "")
                applied({ instanceId: changeSet.instanceId, revision: changeSet.revision });
              call.resume();
              call.write(
                protocol.request({ instanceId: changeSet.instanceId, revision: changeSet.revision }),
              );
            })
            .catch((err: unknown) => fail(err instanceof Error ? err : new Error(String(err))));
          break;
        }
        default:
          break;
      }
    });
    call.on("error", (err: Error) => fail(err));
    call.on("end", () => fail(new Error("server ended the watch stream")));
    call.write(protocol.request(resume));
  });
}
