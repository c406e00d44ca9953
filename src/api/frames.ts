// Pre-encoded OpItem messages, each already in gRPC's length-prefixed form (a zero flag byte and
// a 4-byte big-endian length before the OpItem bytes). The server writes these bytes as they are,
// so a value shared by many streams and many nodes is encoded once, not once per stream. A frame
// may also hold several such messages back to back (a service's endpoints, for a full state).

import { OpItem, type Set as WireSet } from "./gen/api/localv1/api.ts";

export type Frame = Buffer;

export const GRPC_PREFIX_BYTES = 5;

function framed(message: Uint8Array): Frame {
  const out = Buffer.allocUnsafe(GRPC_PREFIX_BYTES + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, GRPC_PREFIX_BYTES);
  return out;
}

/** The OpItem messages in a frame, without their gRPC prefixes. */
export function opItemsOf(frame: Frame): Buffer[] {
  const out: Buffer[] = [];
  for (let offset = 0; offset < frame.length; ) {
    const length = frame.readUInt32BE(offset + 1);
    out.push(frame.subarray(offset + GRPC_PREFIX_BYTES, offset + GRPC_PREFIX_BYTES + length));
    offset += GRPC_PREFIX_BYTES + length;
  }
  return out;
}

export function setFrame(set: WireSet, path: string, bytes: Uint8Array): Frame {
  return framed(
    OpItem.encode({
      Op: { $case: "Set", value: { Ref: { Set: set, Path: path }, Bytes: Buffer.from(bytes) } },
    }).finish(),
  );
}

export function deleteFrame(set: WireSet, path: string): Frame {
  return framed(OpItem.encode({ Op: { $case: "Delete", value: { Set: set, Path: path } } }).finish());
}

export function resetFrame(instanceId: string): Frame {
  return framed(
    OpItem.encode({ Op: { $case: "Reset", value: { InstanceID: instanceId, Revision: 0 } } }).finish(),
  );
}

export function syncFrame(instanceId: string, revision: number): Frame {
  return framed(
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
  return a === b || Buffer.compare(a, b) === 0;
}
