// The one reader of `iptables-save` output: per table, its chains (built-in or not) and its
// rules with their jump targets, as saved. Pure; kpng's iptables backend and the removal of
// kube-proxy's leftovers both read the kernel through it.

/** One table as saved. */
export interface SavedTable {
  readonly chains: Map<string, { readonly builtin: boolean }>;
  readonly rules: { readonly chain: string; readonly target: string | undefined; readonly line: string }[];
}

export function parseIptablesSave(text: string): Map<string, SavedTable> {
  const tables = new Map<string, SavedTable>();
  let current: SavedTable | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("*")) {
      current = { chains: new Map(), rules: [] };
      tables.set(line.slice(1), current);
    } else if (current === undefined || line === "" || line.startsWith("#") || line === "COMMIT") {
    } else if (line.startsWith(":")) {
      const [name = "", policy = "-"] = line.slice(1).split(/\s+/);
      current.chains.set(name, { builtin: policy !== "-" });
    } else if (line.startsWith("-A ")) {
      const chain = line.split(/\s+/)[1] ?? "";
      const target = /\s-[jg]\s+(\S+)/.exec(line)?.[1];
      current.rules.push({ chain, target, line });
    }
  }
  return tables;
}
