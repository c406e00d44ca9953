// Dialing the watch API: a target as the CLI takes it ("unix:///path", "tcp://host:port" or
// "host:port") and optional mTLS files.

import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { splitHostPort } from "../lib/host-port.ts";

export interface TlsPaths {
  readonly cert?: string;
  readonly key?: string;
  readonly ca?: string;
}

/** The grpc-js target for an --api value; throws a usage error for anything else. */
export function dialTarget(api: string): string {
  if (api.startsWith("unix://")) {
    if (!api.startsWith("unix:///"))
      throw new Error(`--api ${api}: a unix socket needs an absolute path (unix:///…)`);
    return api;
  }
  const address = api.startsWith("tcp://") ? api.slice("tcp://".length) : api;
  const parsed = splitHostPort(address);
  if (parsed === undefined || parsed.host === "" || parsed.port < 1)
    throw new Error(`--api ${api}: expected unix:///path, tcp://host:port or host:port`);
  return address;
}

/** Insecure without TLS files; otherwise TLS, with a client certificate when cert and key are given. */
export function clientCredentials(tls: TlsPaths = {}): grpc.ChannelCredentials {
  if (tls.ca === undefined && tls.cert === undefined && tls.key === undefined) {
    return grpc.credentials.createInsecure();
  }
  if ((tls.cert === undefined) !== (tls.key === undefined)) {
    throw new Error("--tls-cert and --tls-key go together");
  }
  const read = (path: string | undefined, flag: string) => {
    if (path === undefined) return null;
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`${flag} ${path}: ${(err as Error).message}`);
    }
  };
  return grpc.credentials.createSsl(
    read(tls.ca, "--tls-ca"),
    read(tls.key, "--tls-key"),
    read(tls.cert, "--tls-cert"),
  );
}
