// `kpng cleanup all`: removes what every kernel backend of this build installed (nft tables,
// iptables chains and jumps in both variants), each with its default options, as a rollback
// to kube-proxy needs. A backend that fails does not stop the others; the command then fails.

import type { LocalSinkPlugin, RunContext } from "../plugin/contracts.ts";

export async function cleanupAll(sinks: readonly LocalSinkPlugin[], ctx: RunContext): Promise<void> {
  const failures: string[] = [];
  for (const sink of sinks) {
    if (sink.cleanup === undefined) continue;
    try {
      await sink.cleanup(sink.parseOptions({}), ctx);
      ctx.log.info({ backend: sink.name }, "removed kpng's objects");
    } catch (err) {
      ctx.log.error({ backend: sink.name, err: (err as Error).message }, "cleanup failed");
      failures.push(`${sink.name}: ${(err as Error).message}`);
    }
  }
  if (failures.length > 0) throw new Error(`cleanup all failed: ${failures.join("; ")}`);
}
