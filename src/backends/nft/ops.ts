// The operations kpng performs on its nft tables, as data, and the one place that renders them
// as nft statements. The mirror, the skeleton and cleanup produce operations; a transaction is
// rendered once, as the lines `nft -f` reads and, when it is short enough, as the single line
// `nft -i` commits, so nothing ever parses kpng's own rule text back.

import type { NftFamily } from "../../model/ip.ts";

/** Where a base chain hooks into the kernel; kpng's base chains all accept by default. */
export interface BaseChainHook {
  readonly type: "filter" | "nat";
  readonly hook: "prerouting" | "input" | "forward" | "output" | "postrouting";
  /** Numeric: nft 1.0.6 accepts `dstnat` only on nat-capable hooks. */
  readonly priority: number;
}

type DataType = "ipv4_addr" | "ipv6_addr" | "inet_proto" | "inet_service";

/**
 * A set's or map's declaration. The key (and a map's value) is either a list of data types, or a
 * `typeof` expression for values that have no named type (numgen), with the value in the same form.
 */
export interface SetDeclaration {
  readonly key: { readonly types: readonly DataType[] } | { readonly typeOf: string };
  /** Maps only: `verdict`, or the typeof expression of the value. */
  readonly value?: string;
  readonly flags?: readonly ("interval" | "dynamic" | "timeout")[];
  readonly autoMerge?: boolean;
  readonly timeoutSeconds?: number;
}

/** The element data type of addresses of a table's family. */
export function addressType(family: NftFamily): "ipv4_addr" | "ipv6_addr" {
  return family === "ip" ? "ipv4_addr" : "ipv6_addr";
}

export type NftOp =
  | { readonly verb: "add" | "delete"; readonly kind: "table" }
  | { readonly verb: "add"; readonly kind: "chain"; readonly name: string; readonly hook?: BaseChainHook }
  | {
      readonly verb: "add";
      readonly kind: "set" | "map";
      readonly name: string;
      readonly declaration: SetDeclaration;
    }
  | { readonly verb: "flush" | "delete"; readonly kind: "chain" | "set"; readonly name: string }
  | { readonly verb: "add"; readonly kind: "rule"; readonly chain: string; readonly rule: string }
  /** Elements as nft writes them: `10.0.0.1 . tcp . 80` for a set, `key : value` for a map. */
  | {
      readonly verb: "add" | "delete";
      readonly kind: "element";
      readonly set: string;
      readonly elements: readonly string[];
    };

function hookText(h: BaseChainHook): string {
  return `{ type ${h.type} hook ${h.hook} priority ${h.priority}; policy accept; }`;
}

function declarationText(d: SetDeclaration): string {
  const key = "types" in d.key ? `type ${d.key.types.join(" . ")}` : `typeof ${d.key.typeOf}`;
  const parts = [d.value === undefined ? key : `${key} : ${d.value}`];
  if (d.flags !== undefined && d.flags.length > 0) parts.push(`flags ${d.flags.join(",")}`);
  if (d.autoMerge === true) parts.push("auto-merge");
  if (d.timeoutSeconds !== undefined) parts.push(`timeout ${d.timeoutSeconds}s`);
  return `{ ${parts.join("; ")}; }`;
}

/** One operation as an nft statement on one line. */
export function renderOp(op: NftOp, family: NftFamily, table: string): string {
  const t = `${family} ${table}`;
  switch (op.kind) {
    case "table":
      return `${op.verb} table ${t}`;
    case "chain":
      if (op.verb === "add")
        return op.hook ? `add chain ${t} ${op.name} ${hookText(op.hook)}` : `add chain ${t} ${op.name}`;
      return `${op.verb} chain ${t} ${op.name}`;
    case "set":
    case "map":
      if (op.verb === "add") return `add ${op.kind} ${t} ${op.name} ${declarationText(op.declaration)}`;
      // A map is flushed and deleted as a set.
      return `${op.verb} set ${t} ${op.name}`;
    case "rule":
      return `add rule ${t} ${op.chain} ${op.rule}`;
    case "element":
      return `${op.verb} element ${t} ${op.set} { ${op.elements.join(", ")} }`;
  }
}

/**
 * The longest transaction given a one-line form: a longer one goes to `nft -f` whole, and a line
 * of its size would be megabytes of text made for nothing at every transaction of a cold start.
 */
export const MAX_LINE_BYTES = 256 * 1024;

/** A transaction rendered both ways: what `nft -f` reads, and the same statements as one line. */
export interface NftScript {
  /** One statement per line, newline-terminated. */
  readonly text: string;
  /**
   * The statements joined by `; `: `nft -i` commits one line as one transaction. Absent when the
   * text is longer than MAX_LINE_BYTES.
   */
  readonly line?: string;
}

export function renderScript(ops: readonly NftOp[], family: NftFamily, table: string): NftScript {
  const statements = ops.map((op) => renderOp(op, family, table));
  if (statements.length === 0) return { text: "", line: "" };
  // One join with the final newline: `${joined}\n` would be a second copy of a large text when
  // it is written.
  const text = [...statements, ""].join("\n");
  return text.length > MAX_LINE_BYTES ? { text } : { text, line: statements.join("; ") };
}
