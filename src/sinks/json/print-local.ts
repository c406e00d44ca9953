// `to-local to-json`: prints each local state the feed delivers.

import type { LocalStateFeed } from "../../model/local.ts";
import { localStateText } from "./local-state-text.ts";
import { type PrintOptions, printDocuments } from "./write.ts";

type PrintLocalOptions = PrintOptions;

/** Resolves after the first state with `once`, else when the signal aborts; rejects if a write fails. */
export function printLocalStates(feed: LocalStateFeed, options: PrintLocalOptions): Promise<void> {
  return printDocuments(options, (print) => feed.subscribe((state) => print(localStateText(state))));
}
