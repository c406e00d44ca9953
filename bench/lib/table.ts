// The benchmarks' printed tables: a header, a rule, then right-aligned cells.

export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => c.padStart(widths[i] ?? 0)).join("  ");
  return [line(headers), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** `--name=value` from argv, or undefined. */
export function flagValue(name: string, argv: readonly string[] = process.argv): string | undefined {
  const prefix = `--${name}=`;
  return argv.find((a) => a.startsWith(prefix))?.slice(prefix.length);
}

/** `--sizes=1000,100000`; with --quick only 1k; else the given default. */
export function sizesFlag(defaults: readonly number[], argv: readonly string[] = process.argv): number[] {
  const given = flagValue("sizes", argv);
  if (given !== undefined) return given.split(",").map((s) => Number(s.replace(/k$/, "000")));
  return argv.includes("--quick") ? [1000] : [...defaults];
}

/** `--quick`: the CI form of a benchmark, 1k services and few rounds. */
export const quick = process.argv.includes("--quick");

/** The command line's words that are not `--flags`: a benchmark's positional arguments. */
export function positionalArgs(argv: readonly string[] = process.argv): string[] {
  return argv.slice(2).filter((a) => !a.startsWith("--"));
}
