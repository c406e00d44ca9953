// Label and field selectors as the API server evaluates them: the subset a service proxy sends
// (`a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`, comma-separated, all ANDed)
// and the field selector `metadata.name=<name>`.

export type Labels = Readonly<Record<string, string>>;

import { LabelSelectorError, parseLabelSelector as parseStrict } from "../../src/model/label-selector.ts";

export interface LabelSelector {
  readonly matches: (labels: Labels) => boolean;
}

export class SelectorError extends Error {}

/** Splits on commas that are not inside parentheses. */
function splitTerms(selector: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = "";
  for (const ch of selector) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      terms.push(current);
      current = "";
    } else {
      current += ch;
    }
  }
  terms.push(current);
  return terms.map((t) => t.trim()).filter((t) => t !== "");
}

/** The proxy's own parser, its errors turned into the 400 the server answers with. */
export function parseLabelSelector(selector: string): LabelSelector {
  try {
    return parseStrict(selector);
  } catch (err) {
    if (err instanceof LabelSelectorError) throw new SelectorError(err.message);
    throw err;
  }
}

export interface FieldSelector {
  readonly matches: (object: { readonly name: string; readonly namespace: string }) => boolean;
}

/** Supports `metadata.name` and `metadata.namespace` with `=`, `==` and `!=`. */
export function parseFieldSelector(selector: string): FieldSelector {
  const checks = splitTerms(selector).map((term) => {
    const m = /^metadata\.(name|namespace)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw new SelectorError(`field label not supported: ${JSON.stringify(term)}`);
    const field = m[1] as "name" | "namespace";
    const negate = m[2] === "!=";
    const value = m[3]!;
    return (o: { readonly name: string; readonly namespace: string }) => (o[field] === value) !== negate;
  });
  return { matches: (o) => checks.every((c) => c(o)) };
}
