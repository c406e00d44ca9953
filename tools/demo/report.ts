// Turns the demo's answers into a readable table: per target, which endpoints answered (and how
// often), and the client address the endpoint saw (which shows whether the source was NATed).

import type { ProbeResult } from "../netns/probe.ts";
import type { DemoTarget } from "./demo-plan.ts";

export interface TargetOutcome {
  readonly target: DemoTarget;
  readonly results: readonly ProbeResult[];
}

/** "web-1 ×3, web-2 ×1", failures named by class ("timeout ×4"); in order of first appearance. */
export function summarizeAnswers(results: readonly ProbeResult[]): string {
  return countInOrder(results.map((r) => (r.ok ? (r.reply?.name ?? "(not an echo reply)") : r.failure)));
}

/** The distinct source addresses the endpoints saw, or "" when nothing answered. */
export function summarizeSources(results: readonly ProbeResult[]): string {
  const seen = results.flatMap((r) => (r.ok && r.reply !== undefined ? [r.reply.client.address] : []));
  return [...new Set(seen)].join(", ");
}

/** The whole table as text, one line per target, columns padded to fit. */
export function renderTable(outcomes: readonly TargetOutcome[]): string {
  const header = ["SERVICE", "VIA", "FROM", "TARGET", "ANSWERED BY", "SOURCE SEEN BY POD"];
  const rows = outcomes.map(({ target: t, results }) => [
    t.service,
    t.via,
    t.from,
    `${t.proto} ${t.host.includes(":") ? `[${t.host}]` : t.host}:${t.port}`,
    summarizeAnswers(results),
    summarizeSources(results),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]?.length ?? 0)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

function countInOrder(items: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1);
  return [...counts].map(([item, n]) => `${item} ×${n}`).join(", ");
}
