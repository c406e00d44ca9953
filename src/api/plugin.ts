// `kpng <source> to-api`: serve the brain's state over gRPC (localv1 per node, globalv1).

import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { localStateFeed } from "../brain/index.ts";
import type { GlobalSinkPlugin } from "../plugin/contracts.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { DEFAULT_MAX_NODES } from "./local-hub.ts";
import { ApiServer, type TlsFiles } from "./server.ts";

const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

async function readTls(opts: Record<string, unknown>): Promise<TlsFiles | undefined> {
  const cert = opts.tlsCert as string | undefined;
  const key = opts.tlsKey as string | undefined;
  const ca = opts.tlsCa as string | undefined;
  if (cert === undefined && key === undefined && ca === undefined) return undefined;
  if (cert === undefined || key === undefined)
    throw new Error("--tls-cert and --tls-key are both needed for TLS");
  const read = async (path: string, flag: string) => {
    try {
      return await readFile(path);
    } catch (err) {
      throw new Error(`${flag} ${path}: ${(err as Error).message}`);
    }
  };
  return {
    cert: await read(cert, "--tls-cert"),
    key: await read(key, "--tls-key"),
    ca: ca === undefined ? undefined : await read(ca, "--tls-ca"),
  };
}

/** --max-nodes: a positive integer (a bad value is a usage error). */
export function parseMaxNodes(value: unknown): number {
  if (value === undefined) return DEFAULT_MAX_NODES;
  const text = String(value);
  if (!/^[1-9]\d{0,6}$/.test(text))
    throw new UsageError(`--max-nodes: "${text}" is not a positive whole number`);
  return Number(text);
}

export const toApiPlugin: GlobalSinkPlugin = {
  name: "to-api",
  description: "serve each node's local state (localv1) and the global state (globalv1) over gRPC",
  addOptions(cmd: Command): void {
    cmd
      .option(
        "--listen <address>",
        "tcp://host:port or unix:///path; repeatable (default tcp://127.0.0.1:12090)",
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
  async run(store, opts, ctx): Promise<void> {
    const maxNodes = parseMaxNodes(opts.maxNodes);
    const server = new ApiServer({
      hub: { maxNodes },
      listen: (opts.listen as string[] | undefined) ?? ["tcp://127.0.0.1:12090"],
      localFeed: (nodeName) => localStateFeed(store, nodeName),
      globalStore: opts.globalApi === false ? undefined : store,
      tls: await readTls(opts),
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
