// `<source> to-json`: prints the global model once the store has synced, then on each change.

import type { ClusterView } from "../../model/global.ts";
import { globalStateToJson } from "./global-state-json.ts";
import { jsonDocument, type PrintOptions, printDocuments } from "./write.ts";

type PrintGlobalOptions = PrintOptions;

export function printGlobalStates(
  store: Pick<ClusterView, "isSynced" | "subscribe" | "services" | "slices" | "nodes" | "serviceCIDRObjects">,
  options: PrintGlobalOptions,
): Promise<void> {
  return printDocuments(options, (print, isFinished) => {
    let lastPrinted: string | undefined;
    // Writes are chained so documents never interleave; a change during a write is printed after.
    let writing: Promise<void> = Promise.resolve();
    const printIfChanged = (): void => {
      if (isFinished() || !store.isSynced) return;
      const text = jsonDocument(globalStateToJson(store));
      // The store may report its sync after we already printed the synced state.
      if (text === lastPrinted) return;
      lastPrinted = text;
      writing = writing.then(() => print(text));
    };
    const unsubscribe = store.subscribe(printIfChanged);
    printIfChanged();
    return unsubscribe;
  });
}
