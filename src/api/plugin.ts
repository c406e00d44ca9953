// `kpng <source> to-api`: serve the brain's state over gRPC (localv1 per node, globalv1).

import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import type { Server } from "node:http";
import type { Command } from "commander";
import { z } from "zod";
import { localStateFeed } from "../brain/local-state-feed.ts";
import { joinHostPort } from "../lib/host-port.ts";
import type { ClusterView } from "../model/global.ts";
import { close } from "../observability/http-listen.ts";
import { parseStatusAddress, startStatusServer } from "../observability/status-server.ts";
import type { GlobalSinkContext, GlobalSinkPlugin } from "../plugin/contracts.ts";
import { checkedBy, optionalText, parsedBy, parseOptionsWith, switchFlag } from "../plugin/options.ts";
import { DEFAULT_LISTEN, DEFAULT_SOCKET_DIR } from "./defaults.ts";
import { GrpcStatus } from "./grpc-stream.ts";
import { DEFAULT_MAX_NODES } from "./local-hub.ts";
import { ApiServer, parseListen, type SyncReports, type TlsFiles } from "./server.ts";
import { StreamRejection } from "./stream-rejection.ts";

const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

/** A file named by a flag, read now so that a missing one stops kpng before it starts. */
function readFlagFile(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message}`);
  }
}

const fileFlag = optionalText.transform(
  parsedBy((path) => (path === undefined ? undefined : readFlagFile(path))),
);

/** Checks the listen addresses and reads the TLS files, so a mistake stops kpng before it starts. */
const toApiFlags = z
  .object({
    listen: z
      .array(z.string())
      .optional()
      .default([DEFAULT_LISTEN])
      .superRefine(checkedBy((listen: string[]) => listen.map(parseListen))),
    tlsCert: fileFlag,
    tlsKey: fileFlag,
    tlsCa: fileFlag,
    globalApi: z.boolean().optional().default(true),
    everyServiceProxyName: switchFlag,
    metricsAddress: optionalText.transform(
      parsedBy((text) => (text === undefined || text === "" ? undefined : parseStatusAddress(text))),
    ),
    maxNodes: z.coerce
      .string()
      .regex(/^[1-9]\d{0,6}$/, { error: (i) => `"${String(i.input)}" is not a positive whole number` })
      .transform(Number)
      .optional()
      .default(DEFAULT_MAX_NODES),
  })
  .superRefine((f, ctx) => {
    const given = [f.tlsCert, f.tlsKey, f.tlsCa].some((file) => file !== undefined);
    if (given && (f.tlsCert === undefined || f.tlsKey === undefined))
      ctx.addIssue({
        code: "custom",
        path: [f.tlsCert === undefined ? "tlsCert" : "tlsKey"],
        message: "missing: TLS needs both --tls-cert and --tls-key",
      });
  })
  .transform(({ tlsCert, tlsKey, tlsCa, ...f }) => ({
    ...f,
    tls:
      tlsCert === undefined || tlsKey === undefined
        ? undefined
        : ({ cert: tlsCert, key: tlsKey, ca: tlsCa } as TlsFiles),
  }));

type ToApiFlags = z.output<typeof toApiFlags>;

/**
 * The Services a localv1 client of `nodeName` asking for `serviceProxyName` gets (undefined: the
 * source's own).
 */
function proxyNameShare(
  store: ClusterView,
  serviceProxyName: string | undefined,
  nodeName: string,
  ctx: GlobalSinkContext,
): ClusterView {
  if (ctx.remoteBackends !== undefined)
    return ctx.remoteBackends.view(serviceProxyName ?? ctx.serviceProxyName, nodeName);
  if (serviceProxyName === undefined || serviceProxyName === ctx.serviceProxyName) return store;
  const served =
    ctx.serviceProxyName === "" ? "the unlabelled Services" : `--service-proxy-name ${ctx.serviceProxyName}`;
  throw new StreamRejection(
    GrpcStatus.FAILED_PRECONDITION,
    `this brain serves only ${served}; start it with to-api --every-service-proxy-name to serve ${JSON.stringify(serviceProxyName)}`,
  );
}

/** Where the clients' sync reports go: the handover between the backends of each node. */
function syncReports(ctx: GlobalSinkContext): SyncReports | undefined {
  const backends = ctx.remoteBackends;
  if (backends === undefined) return undefined;
  const nameOf = (serviceProxyName: string | undefined) => serviceProxyName ?? ctx.serviceProxyName;
  return {
    reportsSyncs: (nodeName, serviceProxyName) => backends.reportsSyncs(nodeName, nameOf(serviceProxyName)),
    programmed: (nodeName, serviceProxyName, services, families) =>
      backends.programmed(nodeName, nameOf(serviceProxyName), services, families),
  };
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
        "--metrics-address <host:port>",
        "serve /metrics and /healthz there (e.g. the handover fallbacks of --every-service-proxy-name); default: off",
      )
      .option(
        "--max-nodes <count>",
        `most node states served at once; the longest-idle is dropped for a new one (default ${DEFAULT_MAX_NODES})`,
      );
  },
  parseOptions: (raw) => parseOptionsWith(toApiFlags, raw),
  everyProxyName: (opts) => opts.everyServiceProxyName,
  async run(store, opts, ctx): Promise<void> {
    // The default socket's directory is kpng's own to create; any other path is the user's.
    if (opts.listen.includes(DEFAULT_LISTEN))
      await mkdir(DEFAULT_SOCKET_DIR, { recursive: true, mode: 0o700 });
    const server = new ApiServer({
      hub: { maxNodes: opts.maxNodes },
      listen: opts.listen,
      localFeed: (nodeName, serviceProxyName) =>
        localStateFeed(proxyNameShare(store, serviceProxyName, nodeName, ctx), nodeName),
      syncReports: syncReports(ctx),
      globalStore: opts.globalApi ? store : undefined,
      tls: opts.tls,
      log: ctx.log,
    });
    await server.start();
    let status: Server | undefined;
    try {
      if (opts.metricsAddress !== undefined) {
        status = await startStatusServer(opts.metricsAddress, () => store.isSynced);
        ctx.log.info(
          { metrics: joinHostPort(opts.metricsAddress.host, opts.metricsAddress.port) },
          "serving /metrics and /healthz",
        );
      }
      if (!ctx.signal.aborted) {
        await new Promise<void>((resolve) =>
          ctx.signal.addEventListener("abort", () => resolve(), { once: true }),
        );
      }
    } finally {
      if (status !== undefined) await close(status);
      await server.stop();
    }
  },
};
