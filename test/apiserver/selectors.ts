// Label and field selectors as the API server evaluates them: the subset a service proxy sends
// (`a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`, comma-separated, all ANDed)
// and the field selector `metadata.name=<name>`.

export type Labels = Readonly<Record<string, string>>;

type Requirement =
  | { readonly op: "exists" | "notExists"; readonly key: string }
  | { readonly op: "in" | "notIn"; readonly key: string; readonly values: readonly string[] };

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

function parseTerm(term: string): Requirement {
  const set = /^([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
  if (set) {
    const values = set[3]!.split(",").map((v) => v.trim());
    return { op: set[2] === "in" ? "in" : "notIn", key: set[1]!, values };
  }
  const notEqual = /^([^\s!=]+)\s*!=\s*([^\s!=]*)$/.exec(term);
  if (notEqual) return { op: "notIn", key: notEqual[1]!, values: [notEqual[2]!] };
  const equal = /^([^\s!=]+)\s*==?\s*([^\s!=]*)$/.exec(term);
  if (equal) return { op: "in", key: equal[1]!, values: [equal[2]!] };
  const notExists = /^!\s*([^\s!=]+)$/.exec(term);
  if (notExists) return { op: "notExists", key: notExists[1]! };
  if (/^[^\s!=(),]+$/.test(term)) return { op: "exists", key: term };
  throw new SelectorError(`unable to parse requirement: ${JSON.stringify(term)}`);
}

function matchesRequirement(req: Requirement, labels: Labels): boolean {
  const has = Object.hasOwn(labels, req.key);
  switch (req.op) {
    case "exists":
      return has;
    case "notExists":
      return !has;
    case "in":
      return has && req.values.includes(labels[req.key]!);
    case "notIn":
      return !has || !req.values.includes(labels[req.key]!);
  }
}

export function parseLabelSelector(selector: string): LabelSelector {
  const requirements = splitTerms(selector).map(parseTerm);
  return { matches: (labels) => requirements.every((r) => matchesRequirement(r, labels)) };
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
