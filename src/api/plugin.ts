// `kpng <source> to-api`: serve the brain's state over gRPC (localv1 per node, globalv1).

import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import type { Command } from "commander";
import { localStateFeed } from "../brain/local-state-feed.ts";
import type { GlobalSinkPlugin, RawOptions } from "../plugin/contracts.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { DEFAULT_LISTEN, DEFAULT_SOCKET_DIR } from "./defaults.ts";
import { DEFAULT_MAX_NODES } from "./local-hub.ts";
import { ApiServer, parseListen, type TlsFiles } from "./server.ts";

const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

interface ToApiFlags {
  /** --max-nodes: how many node states the server keeps. */
  readonly maxNodes: number;
  readonly listen: readonly string[];
  readonly tls: TlsFiles | undefined;
  readonly globalApi: boolean;
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
        "--max-nodes <count>",
        `most node states served at once; the longest-idle is dropped for a new one (default ${DEFAULT_MAX_NODES})`,
      );
  },
  parseOptions: parseToApiOptions,
  async run(store, opts, ctx): Promise<void> {
    // The default socket's directory is kpng's own to create; any other path is the user's.
    if (opts.listen.includes(DEFAULT_LISTEN))
      await mkdir(DEFAULT_SOCKET_DIR, { recursive: true, mode: 0o700 });
    const server = new ApiServer({
      hub: { maxNodes: opts.maxNodes },
      listen: opts.listen,
      localFeed: (nodeName) => localStateFeed(store, nodeName),
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
