// Pre-encoded OpItem messages. The server writes these bytes as they are (its service
// definitions serialize with the identity function), so a value shared by many streams is
// encoded once, not once per stream.

import { OpItem, type Set as WireSet } from "./gen/api/localv1/api.ts";

export type Frame = Buffer;

export function setFrame(set: WireSet, path: string, bytes: Uint8Array): Frame {
  return Buffer.from(
    OpItem.encode({
      Op: { $case: "Set", value: { Ref: { Set: set, Path: path }, Bytes: Buffer.from(bytes) } },
    }).finish(),
  );
}

export function deleteFrame(set: WireSet, path: string): Frame {
  return Buffer.from(OpItem.encode({ Op: { $case: "Delete", value: { Set: set, Path: path } } }).finish());
}

export function resetFrame(instanceId: string): Frame {
  return Buffer.from(
    OpItem.encode({ Op: { $case: "Reset", value: { InstanceID: instanceId, Revision: 0 } } }).finish(),
  );
}

export function syncFrame(instanceId: string, revision: number): Frame {
  return Buffer.from(
    OpItem.encode({ Op: { $case: "Sync", value: { InstanceID: instanceId, Revision: revision } } }).finish(),
  );
}

/** A value on the wire: its bytes (to compare) and its Set op (to send). */
export interface WireValue {
  readonly bytes: Uint8Array;
  readonly frame: Frame;
}

export function wireValue(set: WireSet, path: string, bytes: Uint8Array): WireValue {
  return { bytes, frame: setFrame(set, path, bytes) };
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.compare(a, b) === 0;
}
