// A JSON cluster file → raw objects, by JSON.parse. A large List is parsed one item at a time, so
// a file longer than a JavaScript string can be read, and each item's raw object can be validated
// and dropped before the next is parsed.

import { isAscii } from "node:buffer";
import { jsonLayout, jsonText } from "../../lib/json-layout.ts";
import { LineLocator } from "./lines.ts";
import {
  isListKind,
  isPlainObject,
  JsonSyntaxError,
  type LocatedObject,
  listItemKind,
  withKind,
} from "./located.ts";

/** Whether the content is meant as JSON: its first character, after spaces, opens an object. */
export function looksLikeJson(content: string | Uint8Array): boolean {
  let i = 0;
  if (typeof content === "string") {
    if (content.charCodeAt(0) === 0xfeff) i = 1;
    while (i < content.length && /\s/.test(content[i] ?? "")) i++;
    return content[i] === "{";
  }
  if (content[0] === 0xef && content[1] === 0xbb && content[2] === 0xbf) i = 3;
  while (content[i] === 0x20 || content[i] === 0x0a || content[i] === 0x0d || content[i] === 0x09) i++;
  return content[i] === 0x7b;
}

/**
 * Files up to this size are parsed by one JSON.parse; larger ones item by item. One item's raw
 * object at a time dies young, where a whole file's raw objects outlive collections, are copied
 * into the old generation and touch fresh memory there, which costs more than outlining the items
 * (docs/performance.md); and only item by item is a file read that is longer than the longest
 * string JavaScript can hold (about 512 MiB).
 */
const MAX_WHOLE_JSON_BYTES = 2 ** 20;

export interface JsonReadOptions {
  /** Defaults to MAX_WHOLE_JSON_BYTES. */
  readonly maxWholeBytes?: number;
  /** Outline a large list byte by byte, without guessing its items by their separator. */
  readonly exactOutline?: boolean;
}

/**
 * Thrown while reading a large list whose items were found by their separator, when one of them
 * does not parse: either the file is broken or the guess was wrong, and only reading it again
 * with `exactOutline` tells which. Nothing read before it may be used.
 */
export class GuessedOutlineFailed extends Error {
  override readonly name = "GuessedOutlineFailed";
}

/** The objects of a JSON file: its items if it is a List, else the object itself. */
export function* jsonObjects(
  bytes: Buffer,
  fileName: string,
  options: JsonReadOptions = {},
): Generator<LocatedObject> {
  const maxWholeBytes = options.maxWholeBytes ?? MAX_WHOLE_JSON_BYTES;
  const lines = new LineLocator(bytes);
  const at = (offset: number) => `${fileName}:${lines.locate(offset).line}`;
  const fail = (offset: number, message: string) => {
    const { line, col } = lines.locate(offset);
    return new JsonSyntaxError(`${fileName}:${line}:${col}: JSON syntax error: ${message}`);
  };
  const ascii = isAscii(bytes);
  const bom = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  if (bytes.length <= maxWholeBytes) {
    const raw = parseValue(bytes, bom, bytes.length, ascii, fail);
    if (!isPlainObject(raw) || !isListKind(raw.kind) || !Array.isArray(raw.items)) {
      yield { raw, where: () => at(bom) };
      return;
    }
    // Where the items start is worked out only if one of them is invalid.
    let starts: readonly (readonly [number, number])[] | undefined;
    const itemWhere = (i: number) => {
      if (starts === undefined) {
        const outline = jsonLayout(bytes, true);
        starts = outline.ok ? (outline.layout.items ?? []) : [];
      }
      return `${at(starts[i]?.[0] ?? bom)}, items[${i}]`;
    };
    const itemKind = listItemKind(raw.kind);
    const items: unknown[] = raw.items;
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      // Let each raw item go once it has been handed on: the file's raw objects are bigger than
      // the validated ones, and need not all stay until the last item is validated.
      items[i] = undefined;
      yield { raw: withKind(item, itemKind), where: () => itemWhere(i) };
    }
    return;
  }
  const outline = jsonLayout(bytes, options.exactOutline === true);
  if (!outline.ok) throw fail(outline.offset, outline.message);
  const { kind, items, guessed } = outline.layout;
  if (!isListKind(kind) || items === undefined) {
    // A wrong guess can hide members, `kind` among them; as a list, every piece is checked.
    if (guessed) throw new GuessedOutlineFailed(`${fileName} is not a list as guessed`);
    yield { raw: parseValue(bytes, bom, bytes.length, ascii, fail), where: () => at(bom) };
    return;
  }
  const itemKind = listItemKind(kind);
  for (let i = 0; i < items.length; i++) {
    const [start, end] = items[i] ?? [0, 0];
    let raw: unknown;
    try {
      raw = parseValue(bytes, start, end, ascii, fail);
    } catch (err) {
      if (guessed) throw new GuessedOutlineFailed(`items[${i}] of ${fileName} does not parse as guessed`);
      throw err;
    }
    // The index too: kubectl output has a line per field, but a JSON file may be a single line.
    yield { raw: withKind(raw, itemKind), where: () => `${at(start)}, items[${i}]` };
  }
}

/** JSON.parse of bytes [start, end); a syntax error is placed in the file. */
function parseValue(
  bytes: Buffer,
  start: number,
  end: number,
  ascii: boolean,
  fail: (offset: number, message: string) => Error,
): unknown {
  const text = jsonText(bytes, start, end, ascii);
  try {
    return JSON.parse(text);
  } catch (err) {
    // V8 says "... in JSON at position N (line L column C)" about the item's text, when it knows.
    const message = (err as Error).message;
    const position = /at position (\d+)/.exec(message)?.[1];
    const offset =
      position === undefined ? start : start + Buffer.byteLength(text.slice(0, Number(position)));
    throw fail(offset, message.replace(/ in JSON at position \d+.*$/, "").slice(0, 200));
  }
}
