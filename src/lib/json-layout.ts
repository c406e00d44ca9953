// The outline of a JSON text that is one object: where its `items` are, and its `kind` and
// `metadata`, found without building the object. A large List is parsed item by item: the text of
// `kubectl get -o json` of a large cluster can be longer than the longest string JavaScript can
// hold (about 512 MiB), and a list page from the API server (a megabyte) as one string is made
// outside V8's young generation, in memory mapped afresh for it, which costs more than parsing it.
// This only finds where values begin and end; it checks the punctuation between the items and the
// top-level members, and leaves everything inside a value to JSON.parse.

export const QUOTE = 0x22;
const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const COLON = 0x3a;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACKET = 0x5d;
export const NEWLINE = 0x0a;
const SPACE = 0x20;
const TAB = 0x09;

interface JsonLayout {
  /** The top-level `kind` value, parsed, or undefined when absent. */
  readonly kind: unknown;
  /** The top-level `metadata` value, parsed, or undefined when absent. */
  readonly metadata: unknown;
  /** Byte ranges [start, end) of the elements of a top-level `items` array, if it has one. */
  readonly items: readonly (readonly [number, number])[] | undefined;
  /**
   * Whether the items were found by the separator the file repeats between them (see
   * guessedElements). An item that then fails JSON.parse may be a wrong guess, not a broken file:
   * the file must be outlined again with `exact`.
   */
  readonly guessed: boolean;
}

type JsonLayoutResult =
  | { readonly ok: true; readonly layout: JsonLayout }
  | { readonly ok: false; readonly offset: number; readonly message: string };

export class LayoutError extends Error {
  readonly offset: number;
  constructor(offset: number, message: string) {
    super(message);
    this.offset = offset;
  }
}

function isSpace(b: number | undefined): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

export function skipSpace(bytes: Uint8Array, i: number): number {
  while (isSpace(bytes[i])) i++;
  return i;
}

// The two loops below see every byte of a large file, so they index the bytes directly: a call to
// Buffer#indexOf per string costs more than the string.

/** The offset after the string that opens at `i`. */
function skipString(bytes: Uint8Array, i: number): number {
  const n = bytes.length;
  let j = i + 1;
  while (j < n) {
    const b = bytes[j++];
    if (b === QUOTE) return j;
    if (b === BACKSLASH) j++;
  }
  throw new LayoutError(i, "unterminated string");
}

/** The offset after the value that starts at `i` (its inside is left to JSON.parse). */
export function skipValue(bytes: Uint8Array, i: number): number {
  const n = bytes.length;
  const first = bytes[i];
  if (first === QUOTE) return skipString(bytes, i);
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    let j = i;
    while (j < n) {
      const b = bytes[j++];
      if (b === QUOTE) {
        // A string, inline: most of a Kubernetes object is strings.
        for (;;) {
          if (j >= n)
            throw new LayoutError(i, first === OPEN_BRACE ? "unterminated object" : "unterminated array");
          const c = bytes[j++];
          if (c === QUOTE) break;
          if (c === BACKSLASH) j++;
        }
      } else if (b === OPEN_BRACE || b === OPEN_BRACKET) depth++;
      else if ((b === CLOSE_BRACE || b === CLOSE_BRACKET) && --depth === 0) return j;
    }
    throw new LayoutError(i, first === OPEN_BRACE ? "unterminated object" : "unterminated array");
  }
  let j = i;
  while (
    j < n &&
    !isSpace(bytes[j]) &&
    bytes[j] !== COMMA &&
    bytes[j] !== CLOSE_BRACE &&
    bytes[j] !== CLOSE_BRACKET
  )
    j++;
  if (j === i) throw new LayoutError(i, "expected a value");
  return j;
}

/**
 * The text of bytes [start, end). `ascii` says every byte is ASCII (all of kubectl's and the API
 * server's output, unless a label or annotation says otherwise): it then decodes faster as
 * Latin-1, to the same text.
 */
export function jsonText(bytes: Buffer, start: number, end: number, ascii: boolean): string {
  return ascii ? bytes.toString("latin1", start, end) : bytes.toString("utf8", start, end);
}

/** JSON.parse of one value of the file; its syntax errors are placed at the value. */
function parseAt(bytes: Buffer, start: number, end: number): unknown {
  try {
    return JSON.parse(bytes.toString("utf8", start, end));
  } catch (err) {
    throw new LayoutError(start, (err as Error).message);
  }
}

function expect(bytes: Uint8Array, i: number, byte: number, what: string): void {
  if (bytes[i] !== byte) throw new LayoutError(i, `expected ${what}`);
}

/**
 * The items of a list repeat one separator: the first item's closing brace, the comma, the next
 * item's opening brace, and around them either the lines of pretty-printed JSON (kubectl's:
 * "\n        },\n        {", which holds newlines, so it is never inside a string) or, in compact
 * JSON (the API server's) or a list of one item per line, the name of the item's first member
 * ('},{"metadata":'; inside a string, the name's opening quote would end the string, and in JSON
 * no string is followed by the rest of a name). The native search for it is many times faster
 * than looking at each byte. It could still match inside an item (a nested list printed at the
 * same indentation, nested objects that start with the same member) or after the list: the pieces
 * are then not items, which JSON.parse of each piece reveals, and the caller starts again with an
 * exact outline. Items from the second-to-last on are found exactly.
 */
function guessedElements(
  bytes: Buffer,
  first: number,
): { elements: [number, number][]; lastStart: number } | undefined {
  if (bytes[first] !== OPEN_BRACE) return undefined;
  const firstEnd = skipValue(bytes, first);
  const comma = skipSpace(bytes, firstEnd);
  if (bytes[comma] !== COMMA) return undefined;
  const second = skipSpace(bytes, comma + 1);
  const separator = itemSeparator(bytes, first, firstEnd, second);
  if (separator === undefined) return undefined;
  const { pattern, closeAt, openAt } = separator;
  const elements: [number, number][] = [[first, firstEnd]];
  let start = second;
  for (;;) {
    const match = bytes.indexOf(pattern, start);
    if (match < 0) return { elements, lastStart: start };
    elements.push([start, match + closeAt + 1]);
    start = match + openAt;
  }
}

/** The bytes between two items, and where in them the first one closes and the next one opens. */
interface ItemSeparator {
  readonly pattern: Buffer;
  /** The offset of the closing brace of the item before, in `pattern`. */
  readonly closeAt: number;
  /** The offset of the opening brace of the item after, in `pattern`. */
  readonly openAt: number;
}

/**
 * The separator between the object that spans [first, firstEnd) and the one that opens at
 * `second` (see guessedElements), copied out of `bytes`; undefined when it is not one that can
 * be searched for.
 */
export function itemSeparator(
  bytes: Buffer,
  first: number,
  firstEnd: number,
  second: number,
): ItemSeparator | undefined {
  if (bytes[second] !== OPEN_BRACE) return undefined;
  const separator =
    prettySeparator(bytes, first, firstEnd, second) ?? memberSeparator(bytes, firstEnd, second);
  if (separator === undefined) return undefined;
  const [from, to] = separator;
  return {
    pattern: Buffer.from(bytes.subarray(from, to)),
    closeAt: firstEnd - 1 - from,
    openAt: second - from,
  };
}

/** The closing brace's line (only indentation before it) up to the next item's opening brace. */
function prettySeparator(
  bytes: Buffer,
  first: number,
  firstEnd: number,
  second: number,
): [number, number] | undefined {
  const lineStart = bytes.lastIndexOf(NEWLINE, firstEnd - 2);
  if (lineStart <= first) return undefined;
  for (let j = lineStart + 1; j < firstEnd - 1; j++)
    if (bytes[j] !== SPACE && bytes[j] !== TAB) return undefined;
  const breakAfter = bytes.indexOf(NEWLINE, firstEnd);
  if (breakAfter < 0 || breakAfter >= second) return undefined;
  return [lineStart, second + 1];
}

/** The closing brace up to the colon after the next item's first member name. */
function memberSeparator(bytes: Buffer, firstEnd: number, second: number): [number, number] | undefined {
  const name = skipSpace(bytes, second + 1);
  if (bytes[name] !== QUOTE) return undefined;
  const colon = skipSpace(bytes, skipString(bytes, name));
  if (bytes[colon] !== COLON) return undefined;
  return [firstEnd - 1, colon + 1];
}

/** The elements of the array that opens at `i`, and the offset after it. */
function arrayElements(
  bytes: Buffer,
  i: number,
  exact: boolean,
): { elements: [number, number][]; end: number; guessed: boolean } {
  let elements: [number, number][] = [];
  i = skipSpace(bytes, i + 1);
  if (bytes[i] === CLOSE_BRACKET) return { elements, end: i + 1, guessed: false };
  const guess = exact ? undefined : guessedElements(bytes, i);
  const guessed = guess !== undefined;
  if (guess !== undefined) {
    elements = guess.elements;
    i = guess.lastStart;
  }
  for (;;) {
    const end = skipValue(bytes, i);
    elements.push([i, end]);
    i = skipSpace(bytes, end);
    if (bytes[i] === CLOSE_BRACKET) return { elements, end: i + 1, guessed };
    expect(bytes, i, COMMA, "',' or ']' after an array element");
    i = skipSpace(bytes, i + 1);
  }
}

/**
 * Outlines `bytes`, which must hold one JSON object (after an optional UTF-8 byte order mark).
 * Unless `exact`, the items of a list are found by their separator (guessedElements).
 */
export function jsonLayout(bytes: Buffer, exact = false): JsonLayoutResult {
  const result = outline(bytes, exact);
  // A failure after a guess may be the guess's; only an exact outline can say the file is broken.
  return !result.ok && !exact ? outline(bytes, true) : result;
}

function outline(bytes: Buffer, exact: boolean): JsonLayoutResult {
  try {
    let i = skipSpace(bytes, bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0);
    expect(bytes, i, OPEN_BRACE, "'{'");
    let kind: unknown;
    let metadata: unknown;
    let items: [number, number][] | undefined;
    let guessed = false;
    i = skipSpace(bytes, i + 1);
    if (bytes[i] !== CLOSE_BRACE) {
      for (;;) {
        expect(bytes, i, QUOTE, "a member name in double quotes");
        const keyEnd = skipString(bytes, i);
        const key = parseAt(bytes, i, keyEnd);
        i = skipSpace(bytes, keyEnd);
        expect(bytes, i, COLON, "':' after a member name");
        i = skipSpace(bytes, i + 1);
        if (key === "items" && bytes[i] === OPEN_BRACKET) {
          const array = arrayElements(bytes, i, exact);
          items = array.elements;
          guessed = array.guessed;
          i = array.end;
        } else {
          const end = skipValue(bytes, i);
          if (key === "kind") kind = parseAt(bytes, i, end);
          else if (key === "metadata") metadata = parseAt(bytes, i, end);
          // The last of two members of one name counts, as with JSON.parse.
          else if (key === "items") items = undefined;
          i = end;
        }
        i = skipSpace(bytes, i);
        if (bytes[i] === CLOSE_BRACE) break;
        expect(bytes, i, COMMA, "',' or '}' after an object member");
        i = skipSpace(bytes, i + 1);
      }
    }
    i = skipSpace(bytes, i + 1);
    if (i < bytes.length) throw new LayoutError(i, "unexpected text after the object");
    return { ok: true, layout: { kind, metadata, items, guessed } };
  } catch (err) {
    if (err instanceof LayoutError) return { ok: false, offset: err.offset, message: err.message };
    throw err;
  }
}
