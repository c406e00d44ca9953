// `kubectl get -o yaml` of many objects is one `kind: List` document, and a YAML parser holds the
// whole document's events at once (a gigabyte for 10k Services). kubectl writes the list as
//
//   apiVersion: v1
//   items:
//   - apiVersion: v1
//     kind: Service
//     …
//   kind: List
//   metadata: …
//
// with every item's lines after its first indented: a line that starts with "- " at column 0 can
// only begin an item (YAML requires the rest of an item, scalars included, to be indented). So
// the items can be cut into runs of items, each parsed on its own as a sequence, and the rest of
// the document parsed without them. This only cuts: the caller parses every part, and if any part
// fails (an alias to an anchor in another part, say) it parses the document whole.

/** Items per part: enough that a part is big, few enough that its events stay small. */
const ITEMS_PER_PART = 256;

interface ListDocumentParts {
  /** The document without its items: the text before them, then the text after them. */
  readonly skeleton: string;
  /** Where the text after the items starts in the document (skeleton offsets past it shift). */
  readonly itemsStart: number;
  /** Runs of items, each a block sequence of its own, with where it starts in the document. */
  readonly parts: readonly { readonly start: number; readonly text: string }[];
}

const ITEMS_KEY = /^items:[ \t]*\r?$/m;

/** The parts of a document that is a list written kubectl's way, or undefined. */
export function splitListDocument(document: string): ListDocumentParts | undefined {
  const key = ITEMS_KEY.exec(document);
  if (key === null) return undefined;
  const nl = document.indexOf("\n", key.index);
  if (nl < 0) return undefined;
  const itemsStart = nl + 1;
  const starts: number[] = [];
  let pos = itemsStart;
  while (pos < document.length) {
    const newline = document.indexOf("\n", pos);
    const lineEnd = newline < 0 ? document.length : newline;
    const c = document.charCodeAt(pos);
    const next = document.charCodeAt(pos + 1);
    if (c === 0x2d && (pos + 1 === lineEnd || next === 0x20 || next === 0x0d)) starts.push(pos);
    else if (c === 0x20 || c === 0x09) {
      // The rest of an item; before the first item, a list indented under its key: not ours.
      if (starts.length === 0) return undefined;
    } else if (!(c === 0x23 || c === 0x0d || pos === lineEnd)) break; // not a comment or blank: the next key
    pos = lineEnd + 1;
  }
  const itemsEnd = Math.min(pos, document.length);
  if (starts.length < 2) return undefined;
  const parts: { start: number; text: string }[] = [];
  for (let i = 0; i < starts.length; i += ITEMS_PER_PART) {
    const start = starts[i] ?? itemsEnd;
    parts.push({ start, text: document.slice(start, starts[i + ITEMS_PER_PART] ?? itemsEnd) });
  }
  return {
    skeleton: document.slice(0, itemsStart) + document.slice(itemsEnd),
    itemsStart,
    parts,
  };
}
