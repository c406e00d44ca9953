// The text of a local state's JSON document (docs/local-state.md), written piece by piece: the
// same characters as `JSON.stringify(localStateToJson(state), null, 2)` and a newline, without
// building every service's document object first or holding the text as one string. At 100k
// Services the document is 160 MB.

import type { LocalState } from "../../model/local.ts";
import { localStateToJson, serviceToJson, sortedServices } from "./local-state-json.ts";

/**
 * About how long a piece is (it holds whole services). Below V8's large-object size (128 KiB), a
 * piece is made in the young generation, whose memory is used again and again; a larger string
 * is made in memory mapped for it alone, and every first touch of memory is a page fault
 * (docs/performance.md, "First touches of memory").
 */
const PIECE_CHARS = 64 * 1024;

/** Services in the first piece: about PIECE_CHARS for services of two ports and ten endpoints. */
const FIRST_BATCH = 32;

/** What JSON.stringify(…, null, 2) writes around the items of a `services` list. */
const LIST_OPEN = '{\n  "services": [\n';
const LIST_CLOSE = "\n  ]\n}";

/** The document in pieces to be written in order; it ends with a newline. */
export function* localStateText(state: LocalState): Generator<string> {
  const services = sortedServices(state);
  const head = JSON.stringify(localStateToJson({ ...state, services: new Map() }), null, 2);
  if (services.length === 0) {
    yield `${head}\n`;
    return;
  }
  // The head ends in `"services": []\n}`: the list is opened instead, and its items follow.
  const open = `${head.slice(0, head.length - "[]\n}".length)}[\n`;
  // A small state is one piece, as the whole document would be.
  let batch = FIRST_BATCH;
  for (let from = 0; from < services.length; ) {
    const to = Math.min(services.length, from + batch);
    // Items of a list under a top-level key are indented as in the whole document.
    const text = JSON.stringify({ services: services.slice(from, to).map(serviceToJson) }, null, 2);
    const items = text.slice(LIST_OPEN.length, text.length - LIST_CLOSE.length);
    yield `${from === 0 ? open : ",\n"}${items}${to === services.length ? "\n  ]\n}\n" : ""}`;
    // As many services next as make PIECE_CHARS at this batch's size per service.
    batch = Math.max(1, Math.floor((PIECE_CHARS * (to - from)) / items.length));
    from = to;
  }
}
