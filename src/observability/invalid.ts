// Bad input loses nothing else: an invalid object is skipped with one log line that names it and
// says why, and counted.

import type { Logger } from "./log.ts";
import { invalidObjectsTotal } from "./metrics.ts";

export interface InvalidObject {
  readonly kind: string;
  /** "namespace/name", or the best name we could find in the raw object. */
  readonly name: string;
  readonly reason: string;
}

export function reportInvalidObject(log: Logger, source: string, invalid: InvalidObject): void {
  invalidObjectsTotal.inc({ kind: invalid.kind, source });
  log.warn({ kind: invalid.kind, object: invalid.name, reason: invalid.reason }, "skipping invalid object");
}
