// The operations kpng performs on its nft tables, as data, and the one place that renders them
// as nft statements. The mirror, the skeleton and cleanup produce operations; a transaction is
// rendered once, both as the lines `nft -f` reads and as the single line `nft -i` commits, so
// nothing ever parses kpng's own rule text back.

import type { NftFamily } from "../../model/ip.ts";

export type NftOp =
  | { readonly verb: "add" | "delete"; readonly kind: "table" }
  /** `hook` is a base chain's declaration, e.g. `{ type nat hook output priority -100; policy accept; }`. */
  | { readonly verb: "add"; readonly kind: "chain"; readonly name: string; readonly hook?: string }
  /** `spec` is the set's declaration, e.g. `{ type ipv4_addr; flags interval; }`. */
  | { readonly verb: "add"; readonly kind: "set" | "map"; readonly name: string; readonly spec: string }
  | { readonly verb: "flush" | "delete"; readonly kind: "chain" | "set"; readonly name: string }
  | { readonly verb: "add"; readonly kind: "rule"; readonly chain: string; readonly rule: string }
  /** Elements as nft writes them: `10.0.0.1 . tcp . 80` for a set, `key : value` for a map. */
  | {
      readonly verb: "add" | "delete";
      readonly kind: "element";
      readonly set: string;
      readonly elements: readonly string[];
    };

/** One operation as an nft statement on one line. */
export function renderOp(op: NftOp, family: NftFamily, table: string): string {
  const t = `${family} ${table}`;
  switch (op.kind) {
    case "table":
      return `${op.verb} table ${t}`;
    case "chain":
      if (op.verb === "add")
        return op.hook ? `add chain ${t} ${op.name} ${op.hook}` : `add chain ${t} ${op.name}`;
      return `${op.verb} chain ${t} ${op.name}`;
    case "set":
    case "map":
      if (op.verb === "add") return `add ${op.kind} ${t} ${op.name} ${op.spec}`;
      // A map is flushed and deleted as a set.
      return `${op.verb} set ${t} ${op.name}`;
    case "rule":
      return `add rule ${t} ${op.chain} ${op.rule}`;
    case "element":
      return `${op.verb} element ${t} ${op.set} { ${op.elements.join(", ")} }`;
  }
}

/** A transaction rendered both ways: what `nft -f` reads, and the same statements as one line. */
export interface NftScript {
  /** One statement per line, newline-terminated. */
  readonly text: string;
  /** The statements joined by `; `: `nft -i` commits one line as one transaction. */
  readonly line: string;
}

export function renderScript(ops: readonly NftOp[], family: NftFamily, table: string): NftScript {
  const statements = ops.map((op) => renderOp(op, family, table));
  return { text: statements.length === 0 ? "" : `${statements.join("\n")}\n`, line: statements.join("; ") };
}
