// A list response's body → its metadata and items, each item parsed on its own. A page of 500
// EndpointSlices is about a megabyte: parsed as one string, that string is made outside V8's young
// generation, in memory mapped afresh for each page, which costs more than the parse itself
// (docs/performance.md). Item by item, every string is small and the young generation's memory is
// used again and again.

import { isAscii } from "node:buffer";
import { jsonLayout, jsonText } from "../lib/json-layout.ts";

interface ListBody {
  readonly metadata?: unknown;
  readonly items?: unknown;
}

/** JSON.parse of the whole body, with the same result or error; faster on large lists. */
export function parseListBody(body: Buffer): ListBody {
  const ascii = isAscii(body);
  const text = (start: number, end: number) => jsonText(body, start, end, ascii);
  /** The list read item by item; undefined when it is not a list or an item does not parse. */
  const byItems = (exact: boolean): ListBody | undefined => {
    const outline = jsonLayout(body, exact);
    if (!outline.ok || outline.layout.items === undefined) return undefined;
    const { metadata, items } = outline.layout;
    try {
      return { metadata, items: items.map(([start, end]) => JSON.parse(text(start, end))) };
    } catch (err) {
      if (err instanceof SyntaxError) return undefined;
      throw err;
    }
  };
  // A guessed outline whose item does not parse was a wrong guess or a broken body: the exact
  // outline tells which. Whatever is not a list of good items is left to JSON.parse of the whole,
  // which gives its result or its own error.
  return byItems(false) ?? byItems(true) ?? (JSON.parse(text(0, body.length)) as ListBody);
}
