// A large JSON List read from its file a window at a time, its items handed on as they are found.
// Read whole, a 100k-Service file is a buffer of a few hundred megabytes that is touched once
// and freed, and fresh memory costs more than parsing it (docs/performance.md); a window of a
// few megabytes is filled again and again. This reader only takes the common shape, a List whose
// items repeat one separator (kubectl's or the API server's layout, see itemSeparator); on
// anything else it stops with NotWindowable, before its objects are used, and the file is read
// whole, which gives the same objects or names what is wrong.

import { isAscii } from "node:buffer";
import { releaseFileBytes } from "../../lib/bounded-read.ts";
import {
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COLON,
  COMMA,
  itemSeparator,
  jsonText,
  LayoutError,
  NEWLINE,
  OPEN_BRACE,
  OPEN_BRACKET,
  QUOTE,
  skipSpace,
  skipValue,
} from "../../lib/json-layout.ts";
import { LineLocator, type NewlineFinder } from "./lines.ts";
import { isListKind, isPlainObject, type LocatedObject, listItemKind, withKind } from "./located.ts";

/** Reads up to `length` bytes of the file at `position` into `into` from `at`; 0 at its end. */
export type ReadAt = (into: Buffer, at: number, length: number, position: number) => number;

/** The file is not a List this reader takes as it goes: read it whole instead. */
export class NotWindowable extends Error {
  override readonly name = "NotWindowable";
}

export interface WindowedJsonOptions {
  readonly fileName: string;
  /** Bytes per window; a window grows to hold an item larger than it. */
  readonly windowBytes: number;
  /** A file longer than this is not read this way (the whole read reports it). */
  readonly maxBytes: number;
  /** Given every byte of the file once, in order (the file's digest). */
  readonly onBytes?: (bytes: Buffer) => void;
}

/** The bytes of the file from `offset` on, as many as the buffer holds; refilled as it is read. */
class FileWindow {
  readonly #read: ReadAt;
  readonly #options: WindowedJsonOptions;
  #buffer: Buffer;
  /** The file offset of the buffer's first byte. */
  offset = 0;
  /** The bytes of the file in the buffer. */
  view: Buffer;
  atEnd = false;
  /** Whether every byte read so far is ASCII (see jsonText). */
  ascii = true;

  constructor(read: ReadAt, options: WindowedJsonOptions) {
    this.#read = read;
    this.#options = options;
    this.#buffer = Buffer.allocUnsafeSlow(options.windowBytes);
    this.view = this.#buffer.subarray(0, 0);
  }

  /** Reads on into the buffer: after `from` (an index in view) moved to the front, or grown. */
  more(from: number): void {
    if (this.atEnd) throw new NotWindowable("the file ended inside a value");
    const kept = this.view.length - from;
    if (from === 0 && kept === this.#buffer.length) {
      const grown = Buffer.allocUnsafeSlow(this.#buffer.length * 2);
      this.#buffer.copy(grown);
      releaseFileBytes(this.#buffer);
      this.#buffer = grown;
    } else if (from > 0) this.#buffer.copyWithin(0, from, this.view.length);
    this.offset += from;
    let length = kept;
    while (length < this.#buffer.length) {
      const n = this.#read(this.#buffer, length, this.#buffer.length - length, this.offset + length);
      if (n === 0) {
        this.atEnd = true;
        break;
      }
      const fresh = this.#buffer.subarray(length, length + n);
      this.#options.onBytes?.(fresh);
      if (this.ascii && !isAscii(fresh)) this.ascii = false;
      length += n;
    }
    if (this.offset + length > this.#options.maxBytes)
      throw new NotWindowable("the file is over the size limit");
    this.view = this.#buffer.subarray(0, length);
  }

  /** Frees the buffer now, not at V8's next full collection. */
  release(): void {
    releaseFileBytes(this.#buffer);
    this.view = this.#buffer;
  }

  /** The text of view[start, end). */
  text(start: number, end: number): string {
    return jsonText(this.view, start, end, this.ascii);
  }
}

/**
 * Newlines of the file, found by reading it again a piece at a time: the window has moved on by
 * the time an invalid item asks for its line, and items ask in file order.
 */
function fileNewlines(read: ReadAt): NewlineFinder {
  const piece = Buffer.allocUnsafe(64 * 1024);
  let pieceStart = 0;
  let pieceLength = 0;
  return (from) => {
    for (;;) {
      if (from < pieceStart || from >= pieceStart + pieceLength) {
        pieceStart = from;
        pieceLength = read(piece, 0, piece.length, from);
        if (pieceLength === 0) return -1;
      }
      const at = piece.subarray(0, pieceLength).indexOf(NEWLINE, from - pieceStart);
      if (at >= 0) return pieceStart + at;
      from = pieceStart + pieceLength;
    }
  };
}

/**
 * The items of the JSON List in the file, each with the list's item kind, as jsonObjects gives
 * them. Throws NotWindowable, at the latest after the last item, when the file is anything else;
 * the objects handed on until then must not be used. `where` answers while the file is open.
 */
export function* windowedJsonObjects(read: ReadAt, options: WindowedJsonOptions): Generator<LocatedObject> {
  const window = new FileWindow(read, options);
  try {
    yield* listItems(window, new LineLocator(fileNewlines(read)), options.fileName);
  } finally {
    window.release();
  }
}

function* listItems(window: FileWindow, lines: LineLocator, fileName: string): Generator<LocatedObject> {
  window.more(0);

  /** `scan` of the window, the window read on (grown) until the scan finds what it needs. */
  const readOn = <T>(scan: () => T): T => {
    for (;;) {
      try {
        return scan();
      } catch (err) {
        if (!(err instanceof LayoutError)) throw err;
        window.more(0);
      }
    }
  };
  /** The end of the value at `i`, read on until it is whole. */
  const valueEnd = (i: number): number => readOn(() => skipValue(window.view, i));
  /** The next byte that is not a space, from `i`, reading on when the window ends first. */
  const nextByte = (i: number): number => {
    for (;;) {
      i = skipSpace(window.view, i);
      if (i < window.view.length || window.atEnd) return i;
      window.more(0);
    }
  };
  const parse = (start: number, end: number): unknown => {
    try {
      return JSON.parse(window.text(start, end));
    } catch {
      throw new NotWindowable("a piece does not parse");
    }
  };

  let kind: unknown;
  /** The kind given to items without one, from the list's kind as it was when they were read. */
  let itemKind: string | undefined;
  /** Whether some item had no kind of its own. */
  let kindless = false;
  let index = 0;
  const located = (start: number, end: number): LocatedObject => {
    const raw = parse(start, end);
    if (isPlainObject(raw) && raw.kind === undefined) kindless = true;
    const offset = window.offset + start;
    const at = index++;
    return {
      raw: withKind(raw, itemKind),
      where: () => `${fileName}:${lines.locate(offset).line}, items[${at}]`,
    };
  };

  /** The items from `i` (after the '['), then the offset after the ']'. */
  function* items(i: number): Generator<LocatedObject, number> {
    if (window.view[i] === CLOSE_BRACKET) return i + 1;
    if (window.view[i] !== OPEN_BRACE) throw new NotWindowable("an item that is not an object");
    const firstEnd = valueEnd(i);
    const after = nextByte(firstEnd);
    if (window.view[after] !== COMMA) {
      yield located(i, firstEnd);
      if (window.view[after] !== CLOSE_BRACKET) throw new NotWindowable("expected ']'");
      return after + 1;
    }
    const second = nextByte(after + 1);
    // The separator may run to the colon after the second item's first member name.
    const separator = readOn(() => itemSeparator(window.view, i, firstEnd, second));
    if (separator === undefined) throw new NotWindowable("no separator to search for");
    yield located(i, firstEnd);
    let start = second;
    for (;;) {
      const match = window.view.indexOf(separator.pattern, start);
      if (match >= 0) {
        yield located(start, match + separator.closeAt + 1);
        start = match + separator.openAt;
      } else if (window.atEnd) break;
      else {
        window.more(start);
        start = 0;
      }
    }
    // The last item is outlined exactly, as the whole read does.
    const lastEnd = valueEnd(start);
    yield located(start, lastEnd);
    const close = nextByte(lastEnd);
    if (window.view[close] !== CLOSE_BRACKET) throw new NotWindowable("expected ']'");
    return close + 1;
  }

  let i = window.view[0] === 0xef && window.view[1] === 0xbb && window.view[2] === 0xbf ? 3 : 0;
  i = nextByte(i);
  if (window.view[i] !== OPEN_BRACE) throw new NotWindowable("not an object");
  let seenItems = false;
  i = nextByte(i + 1);
  while (window.view[i] !== CLOSE_BRACE) {
    if (window.view[i] !== QUOTE) throw new NotWindowable("expected a member name");
    const nameEnd = valueEnd(i);
    const key = parse(i, nameEnd);
    i = nextByte(nameEnd);
    if (window.view[i] !== COLON) throw new NotWindowable("expected ':'");
    i = nextByte(i + 1);
    if (key === "items") {
      if (seenItems || window.view[i] !== OPEN_BRACKET) throw new NotWindowable("not one list of items");
      seenItems = true;
      itemKind = isListKind(kind) ? listItemKind(kind) : undefined;
      i = nextByte(yield* items(nextByte(i + 1)));
    } else {
      const end = valueEnd(i);
      if (key === "kind") kind = parse(i, end);
      i = nextByte(end);
    }
    if (window.view[i] === COMMA) i = nextByte(i + 1);
    else if (window.view[i] !== CLOSE_BRACE) throw new NotWindowable("expected ',' or '}'");
  }
  if (nextByte(i + 1) < window.view.length) throw new NotWindowable("text after the object");
  if (!seenItems || !isListKind(kind)) throw new NotWindowable("not a list");
  // A typed list (ServiceList) gives its kind to the items without one; read whole, the list's
  // last `kind` decides it, which may come after the items.
  if (kindless && listItemKind(kind) !== itemKind) throw new NotWindowable("items without a kind");
}
