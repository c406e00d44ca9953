// The text of a local state's JSON document (docs/local-state.md), written piece by piece: the
// same characters as `JSON.stringify(localStateToJson(state), null, 2)` and a newline, without
// building every service's document object first or holding the text as one string. At 100k
// Services the document is 160 MB.

import type { LocalState } from "../../model/local.ts";
import { localStateToJson, serviceToJson, sortedServices } from "./local-state-json.ts";

/** Services per piece: about 1.6 MB of text for services of two ports and ten endpoints. */
const SERVICES_PER_PIECE = 1000;

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
  for (let from = 0; from < services.length; from += SERVICES_PER_PIECE) {
    const to = Math.min(services.length, from + SERVICES_PER_PIECE);
    const documents = services.slice(from, to).map(serviceToJson);
    // Items of a list under a top-level key are indented as in the whole document.
    const text = JSON.stringify({ services: documents }, null, 2);
    const items = text.slice(LIST_OPEN.length, text.length - LIST_CLOSE.length);
    yield `${from === 0 ? open : ",\n"}${items}${to === services.length ? "\n  ]\n}\n" : ""}`;
  }
}
