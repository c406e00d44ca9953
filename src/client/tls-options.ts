// The --api and --tls-* options every watch client takes (kpng local, kpng api, run()).

import type { Command } from "commander";
import { z } from "zod";
import { DEFAULT_LISTEN } from "../api/defaults.ts";
import type { RawOptions } from "../plugin/contracts.ts";
import { checkedBy, optionalText, parseOptionsWith } from "../plugin/options.ts";
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

/** --api and --tls-* checked: the target's form, the TLS files readable and paired. */
export const apiClientFlags = z
  .object({ api: optionalText, tlsCert: optionalText, tlsKey: optionalText, tlsCa: optionalText })
  .transform(({ api, tlsCert, tlsKey, tlsCa }) => ({
    api: api ?? DEFAULT_API,
    tls: { cert: tlsCert, key: tlsKey, ca: tlsCa } as TlsPaths,
  }))
  .superRefine(
    checkedBy((flags: { api: string; tls: TlsPaths }) => {
      dialTarget(flags.api);
      clientCredentials(flags.tls);
    }),
  );

/** The checked --api and --tls-* options. */
export type ApiClientFlags = z.output<typeof apiClientFlags>;

/** Reads and checks --api and --tls-*; throws a UsageError naming the flag. */
export function apiClientOptions(raw: RawOptions): ApiClientFlags {
  return parseOptionsWith(apiClientFlags, raw);
}
