// `kpng <source> to-api`: serve the brain's state over gRPC (localv1 per node, globalv1).

import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import type { Command } from "commander";
import { localStateFeed } from "../brain/local-state-feed.ts";
import type { ClusterView } from "../model/global.ts";
import type { GlobalSinkContext, GlobalSinkPlugin, RawOptions } from "../plugin/contracts.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { DEFAULT_LISTEN, DEFAULT_SOCKET_DIR } from "./defaults.ts";
import { GrpcStatus } from "./grpc-stream.ts";
import { DEFAULT_MAX_NODES } from "./local-hub.ts";
import { ApiServer, parseListen, type TlsFiles } from "./server.ts";
import { StreamRejection } from "./stream-rejection.ts";

const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

interface ToApiFlags {
  /** --max-nodes: how many node states the server keeps. */
  readonly maxNodes: number;
  readonly listen: readonly string[];
  readonly tls: TlsFiles | undefined;
  readonly globalApi: boolean;
  /** --every-service-proxy-name: localv1 clients may ask for any proxy name's Services. */
  readonly everyProxyName: boolean;
}

/** Checks the listen addresses and reads the TLS files, so a mistake stops kpng before it starts. */
function parseToApiOptions(raw: RawOptions): ToApiFlags {
  const listen = Array.isArray(raw.listen) ? raw.listen.map(String) : [DEFAULT_LISTEN];
  for (const address of listen) {
    try {
      parseListen(address);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  return {
    listen,
    tls: readTls(raw),
    globalApi: raw.globalApi !== false,
    maxNodes: parseMaxNodes(raw.maxNodes),
    everyProxyName: raw.everyServiceProxyName === true,
  };
}

function readTls(raw: RawOptions): TlsFiles | undefined {
  const text = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  const cert = text(raw.tlsCert);
  const key = text(raw.tlsKey);
  const ca = text(raw.tlsCa);
  if (cert === undefined && key === undefined && ca === undefined) return undefined;
  if (cert === undefined || key === undefined)
    throw new UsageError("--tls-cert and --tls-key are both needed for TLS");
  const read = (path: string, flag: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new UsageError(`${flag} ${path}: ${(err as Error).message}`);
    }
  };
  return {
    cert: read(cert, "--tls-cert"),
    key: read(key, "--tls-key"),
    ca: ca === undefined ? undefined : read(ca, "--tls-ca"),
  };
}

/** --max-nodes: a positive integer (a bad value is a usage error). */
function parseMaxNodes(value: unknown): number {
  if (value === undefined) return DEFAULT_MAX_NODES;
  const text = String(value);
  if (!/^[1-9]\d{0,6}$/.test(text))
    throw new UsageError(`--max-nodes: "${text}" is not a positive whole number`);
  return Number(text);
}

/** The Services a localv1 client asking for `serviceProxyName` gets (undefined: the source's own). */
function proxyNameShare(
  store: ClusterView,
  serviceProxyName: string | undefined,
  ctx: GlobalSinkContext,
): ClusterView {
  if (serviceProxyName === undefined) return store;
  if (ctx.proxyNameView !== undefined) return ctx.proxyNameView(serviceProxyName);
  if (serviceProxyName === ctx.serviceProxyName) return store;
  const served =
    ctx.serviceProxyName === "" ? "the unlabelled Services" : `--service-proxy-name ${ctx.serviceProxyName}`;
  throw new StreamRejection(
    GrpcStatus.FAILED_PRECONDITION,
    `this brain serves only ${served}; start it with to-api --every-service-proxy-name to serve ${JSON.stringify(serviceProxyName)}`,
  );
}

export const toApiPlugin: GlobalSinkPlugin<ToApiFlags> = {
  name: "to-api",
  description: "serve each node's local state (localv1) and the global state (globalv1) over gRPC",
  addOptions(cmd: Command): void {
    cmd
      .option(
        "--listen <address>",
        `tcp://host:port or unix:///path; repeatable (default ${DEFAULT_LISTEN}, which only root can reach)`,
        collect,
      )
      .option("--tls-cert <file>", "server certificate (PEM)")
      .option("--tls-key <file>", "server private key (PEM)")
      .option(
        "--tls-ca <file>",
        "CA that client certificates must be signed by (requires client certificates)",
      )
      .option("--no-global-api", "serve localv1 only")
      .option(
        "--every-service-proxy-name",
        "serve every service proxy name over localv1, each client choosing with its --service-proxy-name " +
          "(reads every Service; default: only the source's --service-proxy-name)",
      )
      .option(
        "--max-nodes <count>",
        `most node states served at once; the longest-idle is dropped for a new one (default ${DEFAULT_MAX_NODES})`,
      );
  },
  parseOptions: parseToApiOptions,
  everyProxyName: (opts) => opts.everyProxyName,
  async run(store, opts, ctx): Promise<void> {
    // The default socket's directory is kpng's own to create; any other path is the user's.
    if (opts.listen.includes(DEFAULT_LISTEN))
      await mkdir(DEFAULT_SOCKET_DIR, { recursive: true, mode: 0o700 });
    const server = new ApiServer({
      hub: { maxNodes: opts.maxNodes },
      listen: opts.listen,
      localFeed: (nodeName, serviceProxyName) =>
        localStateFeed(proxyNameShare(store, serviceProxyName, ctx), nodeName),
      globalStore: opts.globalApi ? store : undefined,
      tls: opts.tls,
      log: ctx.log,
    });
    await server.start();
    if (!ctx.signal.aborted) {
      await new Promise<void>((resolve) =>
        ctx.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
    }
    await server.stop();
  },
};
