// What the YAML and JSON readers hand to validation: raw objects, each able to say where it starts
// in the file. Positions are worked out only when asked, which is only for invalid objects.

import { isPlainObject } from "../../model/field-reader.ts";

export interface LocatedObject {
  readonly raw: unknown;
  /** Where the object starts: "file:line" (JSON list items add ", items[i]"). */
  where(): string;
}

/** Thrown while reading a file that cannot be used as a whole; the message names file and position. */
export class UnreadableFile extends Error {
  override readonly name = "UnreadableFile";
}

/** A JSON syntax error, which the YAML reader may be asked to explain (YAML reads most JSON). */
export class JsonSyntaxError extends UnreadableFile {}

/**
 * A list's items (a typed list such as ServiceList implies its items' kind), or the object itself.
 * `itemWhere` is asked only for items of a list.
 */
export function expandList(
  raw: unknown,
  where: () => string,
  itemWhere: (index: number) => string,
): LocatedObject[] {
  if (!isPlainObject(raw) || !isListKind(raw.kind) || !Array.isArray(raw.items)) return [{ raw, where }];
  const itemKind = listItemKind(raw.kind);
  return raw.items.map((item: unknown, i: number) => ({
    raw: withKind(item, itemKind),
    where: () => itemWhere(i),
  }));
}

/** The kind a typed list (ServiceList) gives its items, which the API sends without one. */
export function listItemKind(listKind: string): string | undefined {
  return listKind === "List" ? undefined : listKind.slice(0, -"List".length);
}

/** An item of a typed list with the list's item kind filled in when it has none. */
export function withKind(item: unknown, itemKind: string | undefined): unknown {
  return itemKind !== undefined && isPlainObject(item) && item.kind === undefined
    ? { ...item, kind: itemKind }
    : item;
}

export function isListKind(kind: unknown): kind is string {
  return typeof kind === "string" && kind.endsWith("List");
}

export { isPlainObject };
