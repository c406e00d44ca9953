// The gRPC server of the watch API: localv1.Sets/Watch (each node's local state) and
// globalv1.Sets/Watch (the global state) on one or more listeners.

import { randomBytes } from "node:crypto";
import { chmod, rm } from "node:fs/promises";
import { type HostPort, joinHostPort, splitHostPort } from "../lib/host-port.ts";
import type { ClusterView } from "../model/global.ts";
import type { IPFamily } from "../model/kube.ts";
import type { ServiceLookup } from "../model/local.ts";
import type { Logger } from "../observability/log.ts";
import { FullStateCache } from "./full-state-cache.ts";
import { GlobalWatchReq } from "./gen/api/globalv1/api.ts";
import { type Programmed, WatchReq } from "./gen/api/localv1/api.ts";
import { type GlobalFlavor, GlobalStates } from "./global-hub.ts";
import { GrpcServer } from "./grpc-server.ts";
import { type HubOptions, type LocalFeedFactory, LocalStateHub, type NodeStates } from "./local-hub.ts";
import { RevisionSession } from "./revision-session.ts";
import { claimUnixSocket } from "./unix-socket.ts";
import { serveWatch } from "./watch-stream.ts";

export interface TlsFiles {
  readonly cert: Buffer;
  readonly key: Buffer;
  /** When set, clients must present a certificate signed by this CA. */
  readonly ca?: Buffer;
}

/**
 * What the localv1 clients that report their syncs (WatchReq.ReportsProgrammed, .Programmed)
 * tell, per node and service proxy name (undefined: the server's own).
 */
export interface SyncReports {
  /** A client of that node and name reports its syncs. */
  reportsSyncs(nodeName: string, serviceProxyName: string | undefined): void;
  /** Its backend synced a state holding `services` into its rules of `families`. */
  programmed(
    nodeName: string,
    serviceProxyName: string | undefined,
    services: ServiceLookup,
    families: readonly IPFamily[],
  ): void;
}

interface ApiServerOptions {
  /** Listen addresses: "tcp://host:port" or "unix:///path". */
  readonly listen: readonly string[];
  readonly localFeed: LocalFeedFactory;
  /** Set to read the clients' sync reports; streams tell clients so in each Sync. */
  readonly syncReports?: SyncReports;
  /** Omit to serve localv1 only. */
  readonly globalStore?: ClusterView;
  readonly tls?: TlsFiles;
  readonly log: Logger;
  readonly hub?: HubOptions;
  /** Server keepalive ping interval; dead peers are dropped after keepaliveTimeoutMs. */
  readonly keepaliveMs?: number;
  readonly keepaliveTimeoutMs?: number;
  /** Streams one client connection may have open at once. */
  readonly maxStreamsPerConnection?: number;
  /** Fixed instance id, for tests; random otherwise. */
  readonly instanceId?: string;
}

type ListenSpec = { readonly kind: "unix"; readonly path: string } | ({ readonly kind: "tcp" } & HostPort);

/** Parses a --listen value; a bare "host:port" is TCP. */
export function parseListen(spec: string): ListenSpec {
  if (spec.startsWith("unix://")) {
    const path = spec.slice("unix://".length);
    if (!path.startsWith("/")) throw new Error(`"${spec}": a unix socket needs an absolute path (unix:///…)`);
    return { kind: "unix", path };
  }
  const address = splitHostPort(spec.startsWith("tcp://") ? spec.slice("tcp://".length) : spec);
  if (address === undefined) throw new Error(`"${spec}" is not tcp://host:port or unix:///path`);
  // An empty host would listen on every interface; make that an explicit choice.
  return { kind: "tcp", host: address.host || "127.0.0.1", port: address.port };
}

export class ApiServer {
  readonly instanceId: string;
  readonly #server: GrpcServer;
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
    this.#server = new GrpcServer({
      tls: options.tls,
      keepaliveMs: options.keepaliveMs ?? 30_000,
      keepaliveTimeoutMs: options.keepaliveTimeoutMs ?? 10_000,
      maxStreamsPerConnection: options.maxStreamsPerConnection,
    });
    const nextRevision = () => ++this.#revision;
    const fullStates = options.hub?.fullStates ?? new FullStateCache();
    this.#hub = new LocalStateHub(options.localFeed, { ...options.hub, nextRevision, fullStates });
    this.#global =
      options.globalStore === undefined
        ? undefined
        : new GlobalStates(options.globalStore, nextRevision, { ...options.hub, fullStates });
    const log = options.log;
    this.#server.addMethod("/localv1.Sets/Watch", {
      decode: (b) => WatchReq.decode(b),
      handle: (call) => {
        let node: NodeStates | undefined;
        const release = () => {
          if (node !== undefined) this.#hub.release(node);
          node = undefined;
        };
        const reports = options.syncReports;
        const stateFor = (req: WatchReq): NodeStates => {
          if (node?.nodeName !== req.NodeName || node.serviceProxyName !== req.ServiceProxyName) {
            release();
            node = this.#hub.acquire(req.NodeName, req.ServiceProxyName);
          }
          if (req.ReportsProgrammed === true) reports?.reportsSyncs(node.nodeName, node.serviceProxyName);
          return node;
        };
        const report = (req: WatchReq): boolean => {
          if (req.Programmed === undefined) return false;
          if (reports !== undefined && node !== undefined) this.#programmed(node, req.Programmed, reports);
          return true;
        };
        serveWatch(
          call,
          () => new RevisionSession<WatchReq>(this.instanceId, stateFor, release, reports !== undefined),
          log,
          report,
        );
      },
    });
    const global = this.#global;
    if (global !== undefined) {
      this.#server.addMethod("/globalv1.Sets/Watch", {
        decode: (b) => GlobalWatchReq.decode(b),
        handle: (call) => {
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

  /** A client's report of what its backend programmed: passed on when it names a state known here. */
  #programmed(node: NodeStates, programmed: Programmed, reports: SyncReports): void {
    if (programmed.InstanceID !== this.instanceId) return;
    const services = node.servicesAt(programmed.Revision);
    // Too old to look up: a later report follows the client's next sync.
    if (services === undefined) return;
    const families = programmed.Families.filter((f): f is IPFamily => f === "IPv4" || f === "IPv6");
    reports.programmed(node.nodeName, node.serviceProxyName, services, families);
  }

  async start(): Promise<void> {
    for (const spec of this.#options.listen) {
      const listen = parseListen(spec);
      if (listen.kind === "unix") {
        await claimUnixSocket(listen.path);
        await this.#server.listen({ path: listen.path }).catch((err: Error) => {
          throw new Error(`--listen ${spec}: ${err.message}`);
        });
        await chmod(listen.path, 0o600);
        this.#sockets.push(listen.path);
        this.addresses.push(`unix://${listen.path}`);
      } else {
        const port = await this.#server
          .listen({ host: listen.host, port: listen.port })
          .catch((err: Error) => {
            throw new Error(`--listen ${spec}: ${err.message}`);
          });
        this.addresses.push(joinHostPort(listen.host, port));
      }
      this.#options.log.info({ listen: this.addresses.at(-1) }, "watch API listening");
    }
  }

  /** Node states held for watchers (and recently idle ones, for resume). */
  get nodeCount(): number {
    return this.#hub.nodeCount;
  }

  /** What each open stream still holds to send: bounded however slow its client is. */
  streams(): { readonly frames: number; readonly bytes: number }[] {
    return this.#server.calls().map((c) => c.pending);
  }

  async stop(): Promise<void> {
    await this.#server.stop();
    this.#hub.close();
    this.#global?.close();
    for (const path of this.#sockets) await rm(path, { force: true });
  }

  /** Drops every stream at once (tests use it to simulate a broken connection). */
  forceStop(): void {
    this.#server.forceStop();
    this.#hub.close();
    this.#global?.close();
  }
}
