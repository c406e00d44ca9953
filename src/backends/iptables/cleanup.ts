// `kpng cleanup iptables`: removes exactly kpng's jumps from the built-in chains and its KPNG-
// chains, per table, leaving every other rule and chain alone. Pure: works on saved tables.

import { parseSave } from "./saved.ts";

/** Restore input that removes kpng from one table, or "" when kpng has nothing there. */
export function cleanupTableText(table: string, savedText: string): string {
  const saved = parseSave(savedText);
  if (saved.chains.size === 0 && saved.jumps.size === 0) return "";
  const chains = [...saved.chains];
  const lines = [`*${table}`, ...chains.map((c) => `:${c} - [0:0]`)];
  for (const rules of saved.jumps.values()) for (const r of rules) lines.push(r.replace(/^-A /, "-D "));
  for (const c of chains) lines.push(`-X ${c}`);
  lines.push("COMMIT");
  return `${lines.join("\n")}\n`;
}
