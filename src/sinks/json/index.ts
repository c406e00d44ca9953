// The to-json sinks: JSON dumps of the local state and of the global model.

export { type GlobalStateJson, globalStateToJson, withSortedKeys } from "./global-state-json.ts";
export {
  type LocalServiceJson,
  type LocalServicePortJson,
  type LocalStateJson,
  localStateToJson,
} from "./local-state-json.ts";
export { toJsonGlobalSink, toJsonLocalSink } from "./plugins.ts";
export { printGlobalStates } from "./print-global.ts";
export { printLocalStates } from "./print-local.ts";
