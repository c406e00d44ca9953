// Client requests from inside a namespace (implementation in tools/netns/probe.ts): one process per
// batch, results in request order, failures classified as refused / timeout / unreachable / ….
//
//   const [r] = await probeFrom(topo.client.ns, [{ proto: "tcp", host: "203.0.113.10", port: 80 }]);
//   assert.equal(r.ok && r.reply?.name, "web-1");

import type { ProbeRequest, ProbeResult } from "../../tools/netns/probe.ts";

export {
  classifyError,
  type ProbeBatch,
  type ProbeFailure,
  type ProbeRequest,
  type ProbeResult,
  probe,
  probeAll,
} from "../../tools/netns/probe.ts";
export { probeFrom, probeOneFrom } from "../../tools/netns/probe-from.ts";

/** The name of the endpoint that answered, or the failure class ("refused", "timeout", …). */
export function outcome(result: ProbeResult): string {
  if (!result.ok) return result.failure;
  return result.reply?.name ?? `answer:${result.answer}`;
}

/** A TCP request to host:port, given up after `timeoutMs`. */
export const tcp = (host: string, port: number, timeoutMs = 1000): ProbeRequest => ({
  proto: "tcp",
  host,
  port,
  timeoutMs,
});
