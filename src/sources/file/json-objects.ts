// A JSON cluster file → raw objects. A List is parsed one item at a time (JSON.parse on each item's
// bytes), so a file longer than a JavaScript string can be read, and each item's raw object can be
// validated and dropped before the next is parsed.

import { jsonLayout } from "./json-layout.ts";
import { LineLocator } from "./lines.ts";
import { isListKind, JsonSyntaxError, type LocatedObject, listItemKind, withKind } from "./located.ts";

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

/** The objects of a JSON file: its items if it is a List, else the object itself. */
export function* jsonObjects(bytes: Buffer, fileName: string): Generator<LocatedObject> {
  const lines = new LineLocator(bytes);
  const at = (offset: number) => `${fileName}:${lines.locate(offset).line}`;
  const fail = (offset: number, message: string) => {
    const { line, col } = lines.locate(offset);
    return new JsonSyntaxError(`${fileName}:${line}:${col}: JSON syntax error: ${message}`);
  };
  const outline = jsonLayout(bytes);
  if (!outline.ok) throw fail(outline.offset, outline.message);
  const { kind, items } = outline.layout;
  if (!isListKind(kind) || items === undefined) {
    const bom = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
    yield { raw: parseValue(bytes, bom, bytes.length, fail), where: () => at(bom) };
    return;
  }
  const itemKind = listItemKind(kind);
  for (let i = 0; i < items.length; i++) {
    const [start, end] = items[i] ?? [0, 0];
    const raw = parseValue(bytes, start, end, fail);
    // The index too: kubectl output has a line per field, but a JSON file may be a single line.
    yield { raw: withKind(raw, itemKind), where: () => `${at(start)}, items[${i}]` };
  }
}

/** JSON.parse of bytes [start, end); a syntax error is placed in the file. */
function parseValue(
  bytes: Buffer,
  start: number,
  end: number,
  fail: (offset: number, message: string) => Error,
): unknown {
  const text = bytes.toString("utf8", start, end);
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
