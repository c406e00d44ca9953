// The readable form of `kpng explain`: per Service a header, then per port and kind of traffic
// the addresses, the verdict and one aligned row per endpoint; with --rules the kernel objects
// and the drift found.

import { endpointString } from "../model/local.ts";
import type { ExplainResult } from "./explain.ts";

/** Rows of cells → lines, each column as wide as its widest cell. */
function aligned(rows: readonly (readonly string[])[], indent: string): string[] {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return rows.map((row) =>
    (
      indent + row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join("  ")
    ).trimEnd(),
  );
}

function renderOne(r: ExplainResult): string[] {
  const lines: string[] = [];
  lines.push(
    `Service ${r.service} (${r.type}) seen from node ${r.node}: ${r.proxied ? "proxied" : "not proxied"}`,
  );
  const affinity =
    r.sessionAffinity.type === "ClientIP" ? `ClientIP, ${r.sessionAffinity.timeoutSeconds}s` : "None";
  lines.push(`  session affinity: ${affinity}`);
  lines.push(
    `  internalTrafficPolicy: ${r.internalTrafficPolicy}   externalTrafficPolicy: ${r.externalTrafficPolicy}`,
  );
  for (const note of r.notes) lines.push(`  note: ${note}`);
  for (const port of r.ports) {
    const portName = `${port.name === "" ? "(unnamed)" : port.name} ${port.port}/${port.protocol}`;
    for (const kind of port.kinds) {
      lines.push("");
      const where = kind.addresses.length === 0 ? "" : ` on ${kind.addresses.join(", ")}`;
      lines.push(`  port ${portName}, ${kind.kind}${where} (policy ${kind.trafficPolicy}): ${kind.verdict}`);
      if (kind.endpoints.length === 0) {
        lines.push("    no endpoints");
        continue;
      }
      const rows = [["ENDPOINT", "NODE", "USED", "REASON"]];
      for (const ep of kind.endpoints)
        rows.push([endpointString(ep), ep.node === "" ? "-" : ep.node, ep.used ? "yes" : "no", ep.reason]);
      lines.push(...aligned(rows, "    "));
    }
  }
  if (r.rules !== undefined) {
    lines.push("", `  kernel objects (${r.rules.backend}):`);
    for (const obj of r.rules.objects) {
      lines.push(`    ${obj.kind} ${obj.name}`);
      for (const line of obj.lines) lines.push(`      ${line}`);
    }
    if (r.rules.drift.length === 0) lines.push("  drift: none, the kernel matches the brain");
    for (const d of r.rules.drift) {
      lines.push(`  DRIFT ${d.object}`);
      lines.push(`    expected: ${d.expected === "" ? "(nothing)" : d.expected}`);
      lines.push(`    found:    ${d.found === "" ? "(nothing)" : d.found}`);
    }
  }
  return lines;
}

export function renderExplanationTable(results: readonly ExplainResult[]): string {
  return `${results.map((r) => renderOne(r).join("\n")).join("\n\n")}\n`;
}
