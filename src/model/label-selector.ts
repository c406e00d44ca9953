// Label selectors in the Kubernetes text form: `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`,
// `a notin (x,y)`, comma-separated and ANDed. Keys and values are checked as the API server
// checks label keys and values, so a selector the API server would refuse is refused here too.

import type { Labels } from "./kube.ts";
import { isDnsSubdomain } from "./validate-meta.ts";

type Requirement =
  | { readonly op: "exists" | "notExists"; readonly key: string }
  | { readonly op: "in" | "notIn"; readonly key: string; readonly values: readonly string[] };

export interface LabelSelector {
  readonly requirements: readonly Requirement[];
  readonly matches: (labels: Labels) => boolean;
}

export class LabelSelectorError extends Error {}

const NAME_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

function checkKey(key: string): string {
  const slash = key.indexOf("/");
  const prefix = slash === -1 ? "" : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  const prefixOk = slash === -1 || isDnsSubdomain(prefix);
  if (!prefixOk || !NAME_PART.test(name)) {
    throw new LabelSelectorError(`${JSON.stringify(key)} is not a valid label key`);
  }
  return key;
}

function checkValue(value: string): string {
  if (value !== "" && !NAME_PART.test(value)) {
    throw new LabelSelectorError(`${JSON.stringify(value)} is not a valid label value`);
  }
  return value;
}

/** Splits on commas outside parentheses; unbalanced parentheses are an error. */
function splitTerms(text: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = "";
  for (const ch of text) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (depth < 0 || depth > 1) throw new LabelSelectorError("unbalanced parentheses");
    if (ch === "," && depth === 0) {
      terms.push(current.trim());
      current = "";
    } else {
      current += ch;
    }
  }
  if (depth !== 0) throw new LabelSelectorError("unbalanced parentheses");
  terms.push(current.trim());
  return terms;
}

function parseTerm(term: string): Requirement {
  if (term === "") throw new LabelSelectorError("empty requirement");
  const set = /^(\S+)\s+(in|notin)\s*\(([^()]*)\)$/.exec(term);
  if (set) {
    const values = set[3]!.split(",").map((v) => checkValue(v.trim()));
    return { op: set[2] === "in" ? "in" : "notIn", key: checkKey(set[1]!), values };
  }
  const compare = /^([^\s!=]+)\s*(!=|==|=)\s*([^\s!=]*)$/.exec(term);
  if (compare) {
    const op = compare[2] === "!=" ? "notIn" : "in";
    return { op, key: checkKey(compare[1]!), values: [checkValue(compare[3]!)] };
  }
  const notExists = /^!\s*(\S+)$/.exec(term);
  if (notExists) return { op: "notExists", key: checkKey(notExists[1]!) };
  if (!/[\s!=()<>]/.test(term)) return { op: "exists", key: checkKey(term) };
  throw new LabelSelectorError(`unable to parse requirement ${JSON.stringify(term)}`);
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

/** The empty text selects everything, as in Kubernetes. Throws LabelSelectorError. */
export function parseLabelSelector(text: string): LabelSelector {
  const requirements = text.trim() === "" ? [] : splitTerms(text).map(parseTerm);
  return { requirements, matches: (labels) => requirements.every((r) => matchesRequirement(r, labels)) };
}
