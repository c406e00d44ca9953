// The gRPC server of the watch API: localv1.Sets/Watch (each node's local state) and
// globalv1.Sets/Watch (the global state) on one or more listeners.

import { randomBytes } from "node:crypto";
import { chmod, rm, stat } from "node:fs/promises";
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "../observability/log.ts";
import type { Frame } from "./frames.ts";
import { GlobalWatchReq } from "./gen/api/globalv1/api.ts";
import { WatchReq } from "./gen/api/localv1/api.ts";
import { type GlobalFlavor, GlobalStates, type GlobalStoreView } from "./global-hub.ts";
import { type HubOptions, type LocalFeedFactory, LocalStateHub, type NodeStates } from "./local-hub.ts";
import { RevisionSession } from "./revision-session.ts";
import { serveWatch } from "./watch-stream.ts";

export interface TlsFiles {
  readonly cert: Buffer;
  readonly key: Buffer;
  /** When set, clients must present a certificate signed by this CA. */
  readonly ca?: Buffer;
}

export interface ApiServerOptions {
  /** Listen addresses: "tcp://host:port" or "unix:///path". */
  readonly listen: readonly string[];
  readonly localFeed: LocalFeedFactory;
  /** Omit to serve localv1 only. */
  readonly globalStore?: GlobalStoreView;
  readonly tls?: TlsFiles;
  readonly log: Logger;
  readonly hub?: HubOptions;
  /** Server keepalive ping interval; dead peers are dropped after keepaliveTimeoutMs. */
  readonly keepaliveMs?: number;
  readonly keepaliveTimeoutMs?: number;
  /** Fixed instance id, for tests; random otherwise. */
  readonly instanceId?: string;
}

// The server writes pre-encoded OpItems (frames): the response serializer is the identity.
const identity = (b: Frame): Buffer => b;

const localDefinition: grpc.ServiceDefinition = {
  watch: {
    path: "/localv1.Sets/Watch",
    requestStream: true,
    responseStream: true,
    requestSerialize: (v: WatchReq) => Buffer.from(WatchReq.encode(v).finish()),
    requestDeserialize: (b: Buffer) => WatchReq.decode(b),
    responseSerialize: identity,
    responseDeserialize: identity,
  },
};

const globalDefinition: grpc.ServiceDefinition = {
  watch: {
    path: "/globalv1.Sets/Watch",
    requestStream: true,
    responseStream: true,
    requestSerialize: (v: GlobalWatchReq) => Buffer.from(GlobalWatchReq.encode(v).finish()),
    requestDeserialize: (b: Buffer) => GlobalWatchReq.decode(b),
    responseSerialize: identity,
    responseDeserialize: identity,
  },
};

export interface ListenAddress {
  readonly kind: "tcp" | "unix";
  /** host:port for tcp, the socket path for unix. */
  readonly address: string;
}

/** Parses a --listen value; a bare "host:port" is TCP. */
export function parseListen(spec: string): ListenAddress {
  if (spec.startsWith("unix://")) {
    const path = spec.slice("unix://".length);
    if (!path.startsWith("/"))
      throw new Error(`--listen ${spec}: a unix socket needs an absolute path (unix:///…)`);
    return { kind: "unix", address: path };
  }
  const address = spec.startsWith("tcp://") ? spec.slice("tcp://".length) : spec;
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]*):(\d+)$/.exec(address);
  const port = Number(match?.[2]);
  if (match === null || port > 65535)
    throw new Error(`--listen ${spec}: expected tcp://host:port or unix:///path`);
  // An empty host would listen on every interface; make that an explicit choice.
  return { kind: "tcp", address: match[1] === "" ? `127.0.0.1:${port}` : address };
}

export class ApiServer {
  readonly instanceId: string;
  readonly #server: grpc.Server;
  readonly #hub: LocalStateHub;
  readonly #global: GlobalStates | undefined;
  readonly #options: ApiServerOptions;
  readonly #sockets: string[] = [];
  /** The bound addresses, with the real port when 0 was asked. */
  readonly addresses: string[] = [];
  #revision = 0;

  constructor(options: ApiServerOptions) {
    this.#options = options;
    this.instanceId = options.instanceId ?? randomBytes(8).toString("hex");
    this.#server = new grpc.Server({
      "grpc.keepalive_time_ms": options.keepaliveMs ?? 30_000,
      "grpc.keepalive_timeout_ms": options.keepaliveTimeoutMs ?? 10_000,
      "grpc.keepalive_permit_without_calls": 1,
      "grpc.http2.min_ping_interval_without_data_ms": 5_000,
    });
    const nextRevision = () => ++this.#revision;
    this.#hub = new LocalStateHub(options.localFeed, { ...options.hub, nextRevision });
    this.#global =
      options.globalStore === undefined
        ? undefined
        : new GlobalStates(options.globalStore, nextRevision, options.hub);
    const log = options.log;
    this.#server.addService(localDefinition, {
      watch: (call: grpc.ServerDuplexStream<WatchReq, Frame>) => {
        let node: NodeStates | undefined;
        const release = () => {
          if (node !== undefined) this.#hub.release(node.nodeName);
          node = undefined;
        };
        const stateFor = (req: WatchReq): NodeStates => {
          if (node?.nodeName !== req.NodeName) {
            release();
            node = this.#hub.acquire(req.NodeName);
          }
          return node;
        };
        serveWatch(call, () => new RevisionSession<WatchReq>(this.instanceId, stateFor, release), log);
      },
    });
    const global = this.#global;
    if (global !== undefined) {
      this.#server.addService(globalDefinition, {
        watch: (call: grpc.ServerDuplexStream<GlobalWatchReq, Frame>) => {
          serveWatch(
            call,
            (first) => {
              const flavor: GlobalFlavor = first.FullObjects ? "objects" : "kpng";
              const view = global.view(flavor);
              return new RevisionSession<GlobalWatchReq>(this.instanceId, () => view);
            },
            log,
          );
        },
      });
    }
  }

  async start(): Promise<void> {
    const { tls } = this.#options;
    const credentials =
      tls === undefined
        ? grpc.ServerCredentials.createInsecure()
        : grpc.ServerCredentials.createSsl(
            tls.ca ?? null,
            [{ private_key: tls.key, cert_chain: tls.cert }],
            tls.ca !== undefined,
          );
    for (const spec of this.#options.listen) {
      const listen = parseListen(spec);
      if (listen.kind === "unix") await removeStaleSocket(listen.address);
      const port = await new Promise<number>((resolve, reject) =>
        this.#server.bindAsync(
          listen.kind === "unix" ? `unix://${listen.address}` : listen.address,
          credentials,
          (err, p) => (err ? reject(new Error(`--listen ${spec}: ${err.message}`)) : resolve(p)),
        ),
      );
      if (listen.kind === "unix") {
        await chmod(listen.address, 0o600);
        this.#sockets.push(listen.address);
        this.addresses.push(`unix://${listen.address}`);
      } else {
        this.addresses.push(listen.address.replace(/:\d+$/, `:${port}`));
      }
      this.#options.log.info({ listen: this.addresses.at(-1) }, "watch API listening");
    }
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.tryShutdown(() => resolve()));
    this.#server.forceShutdown();
    this.#hub.close();
    this.#global?.close();
    for (const path of this.#sockets) await rm(path, { force: true });
  }

  /** Drops every stream at once (tests use it to simulate a broken connection). */
  forceStop(): void {
    this.#server.forceShutdown();
    this.#hub.close();
    this.#global?.close();
  }
}

async function removeStaleSocket(path: string): Promise<void> {
  const info = await stat(path).catch(() => undefined);
  if (info === undefined) return;
  if (!info.isSocket()) throw new Error(`--listen unix://${path}: exists and is not a socket`);
  await rm(path);
}
