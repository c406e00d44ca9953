// The --api and --tls-* options every watch client takes (kpng local, kpng api, run()).

import type { Command } from "commander";
import type { TlsPaths } from "./connection.ts";

export const DEFAULT_API = "tcp://127.0.0.1:12090";

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
  return {
    cert: opts.tlsCert as string | undefined,
    key: opts.tlsKey as string | undefined,
    ca: opts.tlsCa as string | undefined,
  };
}
