// HTTP GET from inside a namespace (a node script run with `ip netns exec`), for the node
// services' endpoints. A connection error is a result, not an exception.

import type { Netns } from "../../support/netns.ts";

export interface HttpResult {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** Set when no answer came (refused, timeout). */
  readonly error?: string;
}

const SCRIPT = `
const url = process.argv[1];
fetch(url, { signal: AbortSignal.timeout(2000) })
  .then(async (r) => ({ status: r.status, headers: Object.fromEntries(r.headers), body: await r.text() }))
  .catch((e) => ({ status: 0, headers: {}, body: "", error: String(e.cause?.code ?? e.name ?? e) }))
  .then((r) => process.stdout.write(JSON.stringify(r)));
`;

export async function httpGet(ns: Netns, url: string): Promise<HttpResult> {
  const r = await ns.exec([process.execPath, "-e", SCRIPT, url], { timeoutMs: 10_000 });
  return JSON.parse(r.stdout) as HttpResult;
}
