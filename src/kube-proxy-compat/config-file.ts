// Reads a KubeProxyConfiguration (YAML or JSON, as kubeadm writes it into the kube-proxy
// ConfigMap) into a flat map of dotted field paths to values. Pure: the caller reads the file.
// A wrong kind, apiVersion or field type is a UsageError; an unknown field is a warning.

import { parseDocument } from "yaml";
import { isPlainObject } from "../model/field-reader.ts";
import { parseDuration } from "../plugin/duration.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { API_VERSION, FIELDS, type FieldType, KIND } from "./table.ts";

/** Dotted field path → value; a field that is absent or null is not in the map. */
export type ConfigValues = ReadonlyMap<string, unknown>;

interface ReadConfig {
  readonly values: ConfigValues;
  readonly warnings: readonly string[];
}

export function readKubeProxyConfig(text: string, fileName: string): ReadConfig {
  const doc = parseDocument(text, { uniqueKeys: false });
  if (doc.errors.length > 0) {
    throw new UsageError(`${fileName}: not YAML or JSON: ${doc.errors[0]?.message.split("\n")[0]}`);
  }
  const root: unknown = doc.toJS();
  if (!isPlainObject(root)) throw new UsageError(`${fileName}: expected a ${KIND} object`);
  if (root.kind !== KIND) {
    throw new UsageError(`${fileName}: kind is ${JSON.stringify(root.kind)}; expected ${KIND}`);
  }
  if (root.apiVersion !== API_VERSION) {
    throw new UsageError(
      `${fileName}: apiVersion is ${JSON.stringify(root.apiVersion)}; expected ${API_VERSION}`,
    );
  }
  const values = new Map<string, unknown>();
  const warnings: string[] = duplicateKeys(text, fileName);
  walk(root, "", fileName, values, warnings);
  return { values, warnings };
}

function walk(
  obj: Record<string, unknown>,
  prefix: string,
  fileName: string,
  values: Map<string, unknown>,
  warnings: string[],
): void {
  for (const [key, value] of Object.entries(obj)) {
    const path = prefix === "" ? key : `${prefix}.${key}`;
    const type = FIELDS[path];
    if (type === undefined) {
      warnings.push(`${fileName}: unknown field ${path} (not read by kpng)`);
      continue;
    }
    if (value === null || value === undefined) continue;
    const problem = typeProblem(type, value);
    if (problem !== undefined) throw new UsageError(`${fileName}: field ${path}: ${problem}`);
    if (type === "object") walk(value as Record<string, unknown>, path, fileName, values, warnings);
    else values.set(path, value);
  }
}

/** Why value is not of the type, or undefined when it is. */
export function typeProblem(type: FieldType, value: unknown): string | undefined {
  const got = `got ${JSON.stringify(value)}`;
  switch (type) {
    case "string":
      return typeof value === "string" ? undefined : `expected a string, ${got}`;
    case "bool":
      return typeof value === "boolean" ? undefined : `expected true or false, ${got}`;
    case "int":
      return Number.isInteger(value) ? undefined : `expected an integer, ${got}`;
    case "float":
      return typeof value === "number" && Number.isFinite(value) ? undefined : `expected a number, ${got}`;
    case "duration":
      if (typeof value !== "string") return `expected a duration such as "30s", ${got}`;
      try {
        parseDuration(value);
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    case "stringList":
      return Array.isArray(value) && value.every((v) => typeof v === "string")
        ? undefined
        : `expected a list of strings, ${got}`;
    case "boolMap":
      return isPlainObject(value) && Object.values(value).every((v) => typeof v === "boolean")
        ? undefined
        : `expected a map of names to true/false, ${got}`;
    case "object":
      return isPlainObject(value) ? undefined : `expected an object, ${got}`;
    case "any":
      return undefined;
  }
}

/**
 * A key written twice: kube-proxy's strict decoding fails on it and it falls back to lenient
 * decoding with a warning, where the last value wins. So does kpng.
 */
function duplicateKeys(text: string, fileName: string): string[] {
  return parseDocument(text)
    .errors.filter((e) => e.code === "DUPLICATE_KEY")
    .map((e) => `${fileName}: ${e.message.split("\n")[0]}; the last value is used`);
}
