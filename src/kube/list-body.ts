// A list response's body → its metadata and items, each item parsed on its own. A page of 500
// EndpointSlices is about a megabyte: parsed as one string, that string is made outside V8's young
// generation, in memory mapped afresh for each page, which costs more than the parse itself
// (docs/performance.md). Item by item, every string is small and the young generation's memory is
// used again and again.

import { isAscii } from "node:buffer";
import { jsonLayout } from "../lib/json-layout.ts";

interface ListBody {
  readonly metadata?: unknown;
  readonly items?: unknown;
}

/** JSON.parse of the whole body, with the same result or error; faster on large lists. */
export function parseListBody(body: Buffer): ListBody {
  const ascii = isAscii(body);
  const text = (start: number, end: number) =>
    ascii ? body.toString("latin1", start, end) : body.toString("utf8", start, end);
  const byItems = (exact: boolean): ListBody | undefined => {
    const outline = jsonLayout(body, exact);
    if (!outline.ok || outline.layout.items === undefined) return undefined;
    const { metadata, items } = outline.layout;
    return { metadata, items: items.map(([start, end]) => JSON.parse(text(start, end))) };
  };
  const whole = () => JSON.parse(text(0, body.length)) as ListBody;
  try {
    return byItems(false) ?? whole();
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
  }
  // An item of a guessed outline did not parse: the guess was wrong, or the body is broken. An
  // exact outline tells which; a broken body fails as JSON.parse of the whole fails.
  try {
    return byItems(true) ?? whole();
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
    return whole();
  }
}
