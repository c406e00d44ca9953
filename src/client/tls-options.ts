// The --api and --tls-* options every watch client takes (kpng local, kpng api, run()).

import type { Command } from "commander";
import { DEFAULT_LISTEN } from "../api/defaults.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { clientCredentials, dialTarget, type TlsPaths } from "./connection.ts";

/** The brain's default socket (`kpng <source> to-api` without --listen). */
const DEFAULT_API = DEFAULT_LISTEN;

export function addApiOptions(cmd: Command): void {
  cmd
    .option(
      "--api <target>",
      "the brain's watch API: unix:///path, tcp://host:port or host:port",
      DEFAULT_API,
    )
    .option("--tls-cert <file>", "client certificate (PEM), for mTLS")
    .option("--tls-key <file>", "client private key (PEM)")
    .option("--tls-ca <file>", "CA that signed the server certificate; enables TLS");
}

export function tlsFromOptions(opts: Record<string, unknown>): TlsPaths {
  const text = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  return { cert: text(opts.tlsCert), key: text(opts.tlsKey), ca: text(opts.tlsCa) };
}

/** The checked --api and --tls-* options. */
export interface ApiClientFlags {
  readonly api: string;
  readonly tls: TlsPaths;
}

/**
 * Reads and checks --api and --tls-* (the target's form, the TLS files readable); throws a
 * UsageError naming the flag.
 */
export function apiClientOptions(opts: Record<string, unknown>): ApiClientFlags {
  const api = typeof opts.api === "string" && opts.api.trim() !== "" ? opts.api.trim() : DEFAULT_API;
  const tls = tlsFromOptions(opts);
  try {
    dialTarget(api);
    clientCredentials(tls);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return { api, tls };
}
