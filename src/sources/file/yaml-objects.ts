// A YAML cluster file → raw objects. js-yaml's event parser builds plain objects straight from a
// flat event list, with no document model in between; the same events give the offset where each
// document and each item of a `kind: List` starts, from which lines are counted on demand.
// A stream of `---` separated documents is parsed a document at a time, so the events of one
// document are dropped before the next is parsed and objects reach validation as they are read;
// a kubectl `kind: List` is parsed in runs of items (yaml-list-split.ts) for the same reason.

import {
  constructFromEvents,
  EVENT_ID,
  type Event,
  getScalarValue,
  parseEvents,
  YAMLException,
} from "js-yaml";
import { parseAllDocuments } from "yaml";
import { LineLocator } from "./lines.ts";
import { expandList, isPlainObject, type LocatedObject, UnreadableFile } from "./located.ts";
import { splitListDocument } from "./yaml-list-split.ts";

// Guards against "billion laughs" files: a few aliases are normal YAML, thousands are an attack.
const MAX_ALIAS_COUNT = 100;
// Kubernetes objects nest a few dozen levels; the parser refuses deeper input instead of recursing.
const MAX_DEPTH = 100;

const TOO_MANY_ALIASES = `more than ${MAX_ALIAS_COUNT} YAML aliases: refusing to expand them (a Kubernetes file needs few, if any)`;
const TOO_DEEP = `YAML nested too deeply: more than ${MAX_DEPTH} levels (Kubernetes objects nest a few dozen; this is not one)`;

/**
 * A line that is only `---` starts a document wherever it is (YAML forbids such a line inside a
 * scalar), so the text can be cut there. Documents with directives (`%YAML`) are left whole.
 */
const DOCUMENT_START = /^---[ \t]*(?:#[^\n]*)?\r?$/gm;
const DIRECTIVE = /^%/m;

/** The offsets where the pieces of `text` that are parsed separately begin. */
function pieceStarts(text: string): number[] {
  const starts = [0];
  if (DIRECTIVE.test(text)) return starts;
  for (const match of text.matchAll(DOCUMENT_START)) if (match.index > 0) starts.push(match.index);
  return starts;
}

export function* yamlObjects(text: string, fileName: string): Generator<LocatedObject> {
  const lines = new LineLocator(text);
  const at = (offset: number) => `${fileName}:${lines.locate(offset).line}`;
  const starts = pieceStarts(text);
  for (let p = 0; p < starts.length; p++) {
    const base = starts[p] ?? 0;
    const piece = text.slice(base, starts[p + 1] ?? text.length);
    const list = readListInParts(piece);
    if (list !== undefined) {
      const docStart = base + list.start;
      yield* expandList(
        list.raw,
        () => at(docStart),
        (i) => at(base + (list.itemStarts[i] ?? list.start)),
      );
      continue;
    }
    let events: Event[];
    let documents: unknown[];
    try {
      events = parseEvents(piece, { maxDepth: MAX_DEPTH });
      documents = constructFromEvents(events, { source: piece, maxAliases: MAX_ALIAS_COUNT });
    } catch (err) {
      if (!(err instanceof YAMLException)) throw err;
      const offset = base + (err.mark?.position ?? 0);
      if (/maxDepth/.test(err.reason))
        throw new UnreadableFile(`${position(lines, fileName, offset)}: ${TOO_DEEP}`);
      if (/maxAliases/.test(err.reason)) {
        const { line } = lines.locate(offset);
        throw new UnreadableFile(
          `${fileName}: ${TOO_MANY_ALIASES} (the ${MAX_ALIAS_COUNT + 1}th is on line ${line})`,
        );
      }
      const explained = explain(piece) ?? { offset: err.mark?.position ?? 0, message: err.reason };
      throw new UnreadableFile(
        `${position(lines, fileName, base + explained.offset)}: YAML syntax error: ${explained.message}`,
      );
    }
    const layouts = documentLayouts(events, piece);
    for (let d = 0; d < documents.length; d++) {
      const raw = documents[d];
      if (raw === null || raw === undefined) continue;
      const layout = layouts[d];
      const docStart = base + Math.max(0, layout?.start ?? 0);
      yield* expandList(
        raw,
        () => at(docStart),
        (i) => {
          const itemStart = layout?.items?.[i];
          return at(itemStart === undefined || itemStart < 0 ? docStart : base + itemStart);
        },
      );
    }
  }
}

// Documents up to this size get their syntax error described by the `yaml` package, whose messages
// say more ("Flow sequence … must end with a ]" where the fast parser says "deficient indentation").
const MAX_EXPLAINED_CHARS = 1 << 20;

/** The `yaml` package's account of the first syntax error in `piece`, if it finds one. */
function explain(piece: string): { offset: number; message: string } | undefined {
  if (piece.length > MAX_EXPLAINED_CHARS) return undefined;
  for (const doc of parseAllDocuments(piece)) {
    const error = doc.errors[0];
    if (error === undefined) continue;
    // The message's first line, without the position the library appends (we lead with it).
    const message = (error.message.split("\n")[0] ?? "").replace(/ at line \d+, column \d+:?$/, "");
    return { offset: error.pos[0], message };
  }
  return undefined;
}

/**
 * A `kind: List` document written kubectl's way, parsed a run of items at a time (see
 * yaml-list-split.ts); undefined when it is not one, or when any part does not parse on its own,
 * for the caller to parse it whole (and report its errors).
 */
function readListInParts(
  document: string,
): { raw: Record<string, unknown>; start: number; itemStarts: number[] } | undefined {
  const split = splitListDocument(document);
  if (split === undefined) return undefined;
  try {
    const skeletonEvents = parseEvents(split.skeleton, { maxDepth: MAX_DEPTH });
    const [raw, ...more] = constructFromEvents(skeletonEvents, {
      source: split.skeleton,
      maxAliases: MAX_ALIAS_COUNT,
    });
    if (more.length > 0 || !isPlainObject(raw) || raw.items !== null) return undefined;
    const items: unknown[] = [];
    const itemStarts: number[] = [];
    for (const part of split.parts) {
      const events = parseEvents(part.text, { maxDepth: MAX_DEPTH });
      const [sequence, ...rest] = constructFromEvents(events, {
        source: part.text,
        maxAliases: MAX_ALIAS_COUNT,
      });
      const starts = documentLayouts(events, part.text)[0]?.elements;
      if (rest.length > 0 || !Array.isArray(sequence) || starts?.length !== sequence.length) return undefined;
      for (const item of sequence) items.push(item);
      for (const start of starts) itemStarts.push(part.start + start);
    }
    raw.items = items;
    const start = documentLayouts(skeletonEvents, split.skeleton)[0]?.start ?? 0;
    return { raw, start: Math.max(0, start), itemStarts };
  } catch (err) {
    if (err instanceof YAMLException) return undefined;
    throw err;
  }
}

function position(lines: LineLocator, fileName: string, offset: number): string {
  const { line, col } = lines.locate(offset);
  return `${fileName}:${line}:${col}`;
}

interface DocumentLayout {
  /** Where the document's root node starts, -1 if unknown. */
  start: number;
  /** Where each item of a root mapping's `items` sequence starts. */
  items: number[] | undefined;
  /** Where each element of a root sequence starts. */
  elements: number[] | undefined;
}

function startOf(event: Event): number {
  switch (event.type) {
    case EVENT_ID.MAPPING:
    case EVENT_ID.SEQUENCE:
      return event.start;
    case EVENT_ID.SCALAR:
      return event.valueStart;
    case EVENT_ID.ALIAS:
      return event.anchorStart;
    default:
      return -1;
  }
}

/** One layout per document of the events, in order, as constructFromEvents returns documents. */
function documentLayouts(events: readonly Event[], source: string): DocumentLayout[] {
  const layouts: DocumentLayout[] = [];
  let layout: DocumentLayout = { start: -1, items: undefined, elements: undefined };
  let depth = 0; // collections open in the current document
  let rootIsMapping = false;
  let rootIsSequence = false;
  let rootChildren = 0; // nodes seen directly in the root mapping: key, value, key, value…
  let nextIsItems = false; // the next root child is the value of the key "items"
  let inItems = false; // depth-2 nodes are items of the root's `items` sequence
  for (const event of events) {
    if (event.type === EVENT_ID.DOCUMENT) {
      layout = { start: -1, items: undefined, elements: undefined };
      layouts.push(layout);
      depth = 0;
      rootChildren = 0;
      continue;
    }
    if (event.type === EVENT_ID.POP) {
      if (depth > 0) depth--;
      if (depth < 2) inItems = false;
      continue;
    }
    if (depth === 0) {
      layout.start = startOf(event);
      rootIsMapping = event.type === EVENT_ID.MAPPING;
      rootIsSequence = event.type === EVENT_ID.SEQUENCE;
      if (rootIsSequence) layout.elements = [];
    } else if (depth === 1 && rootIsSequence) {
      layout.elements?.push(startOf(event));
    } else if (depth === 1 && rootIsMapping) {
      if (rootChildren % 2 === 0) {
        nextIsItems = event.type === EVENT_ID.SCALAR && getScalarValue(source, event) === "items";
      } else if (nextIsItems && event.type === EVENT_ID.SEQUENCE) {
        layout.items = [];
        inItems = true;
      }
      rootChildren++;
    } else if (depth === 2 && inItems) {
      layout.items?.push(startOf(event));
    }
    if (event.type === EVENT_ID.MAPPING || event.type === EVENT_ID.SEQUENCE) depth++;
  }
  return layouts;
}
