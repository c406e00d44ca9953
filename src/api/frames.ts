// Pre-encoded OpItem messages, each already in gRPC's length-prefixed form (a zero flag byte and
// a 4-byte big-endian length before the OpItem bytes). The server writes these bytes as they are,
// so a value shared by many streams and many nodes is encoded once, not once per stream. A frame
// may also hold several such messages back to back (a service's endpoints, for a full state).

import type { Set as WireSet } from "./gen/api/localv1/api.ts";

export type Frame = Buffer;

export const GRPC_PREFIX_BYTES = 5;

/** Frames back to back in one buffer. */
export function concatFrames(frames: readonly Frame[]): Frame {
  if (frames.length === 1) return frames[0]!;
  let size = 0;
  for (const frame of frames) size += frame.length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const frame of frames) {
    out.set(frame, at);
    at += frame.length;
  }
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

// Set and Delete ops are written by hand (a full state is ~100k of them per node): the same
// bytes the generated encoder gives (frames.test.ts compares them), in one allocation.

function varintLength(n: number): number {
  let length = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    length++;
  }
  return length;
}

function writeVarint(out: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    out[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  out[at++] = n;
  return at;
}

/** A tag and a length-delimited field's length prefix. */
const delimitedLength = (length: number) => 1 + varintLength(length) + length;

function refLength(set: WireSet, pathBytes: number): number {
  return (set === 0 ? 0 : 1 + varintLength(set)) + (pathBytes === 0 ? 0 : delimitedLength(pathBytes));
}

function writeRef(out: Buffer, at: number, set: WireSet, path: string, pathBytes: number): number {
  if (set !== 0) {
    out[at++] = 0x08; // Ref.Set, varint
    at = writeVarint(out, at, set);
  }
  if (pathBytes > 0) {
    out[at++] = 0x12; // Ref.Path, length-delimited
    at = writeVarint(out, at, pathBytes);
    at += out.write(path, at, "utf8");
  }
  return at;
}

/** The frame of an OpItem whose one field (tag) holds a message of `length` bytes. */
function opFrame(tag: number, length: number): { out: Buffer; at: number } {
  const message = delimitedLength(length);
  const out = Buffer.allocUnsafe(GRPC_PREFIX_BYTES + message);
  out[0] = 0;
  out.writeUInt32BE(message, 1);
  out[GRPC_PREFIX_BYTES] = tag;
  return { out, at: writeVarint(out, GRPC_PREFIX_BYTES + 1, length) };
}

export function setFrame(set: WireSet, path: string, bytes: Uint8Array): Frame {
  const pathBytes = Buffer.byteLength(path, "utf8");
  const ref = refLength(set, pathBytes);
  const value = delimitedLength(ref) + (bytes.length === 0 ? 0 : delimitedLength(bytes.length));
  const { out, at: start } = opFrame(0x12 /* OpItem.Set */, value);
  let at = start;
  out[at++] = 0x0a; // Value.Ref
  at = writeVarint(out, at, ref);
  at = writeRef(out, at, set, path, pathBytes);
  if (bytes.length > 0) {
    out[at++] = 0x12; // Value.Bytes
    at = writeVarint(out, at, bytes.length);
    out.set(bytes, at);
  }
  return out;
}

export function deleteFrame(set: WireSet, path: string): Frame {
  const pathBytes = Buffer.byteLength(path, "utf8");
  const ref = refLength(set, pathBytes);
  const { out, at } = opFrame(0x1a /* OpItem.Delete */, ref);
  writeRef(out, at, set, path, pathBytes);
  return out;
}

/** An OpItem holding an EmptyOp (Reset: field 4, Sync: field 1), written by hand like Set. */
function emptyOpFrame(tag: number, instanceId: string, revision: number, readsProgrammed = false): Frame {
  const idBytes = Buffer.byteLength(instanceId, "utf8");
  const length =
    (idBytes === 0 ? 0 : delimitedLength(idBytes)) +
    (revision === 0 ? 0 : 1 + varintLength(revision)) +
    (readsProgrammed ? 2 : 0);
  const { out, at: start } = opFrame(tag, length);
  let at = start;
  if (idBytes > 0) {
    out[at++] = 0x0a; // EmptyOp.InstanceID
    at = writeVarint(out, at, idBytes);
    at += out.write(instanceId, at, "utf8");
  }
  if (revision !== 0) {
    out[at++] = 0x10; // EmptyOp.Revision, varint
    at = writeVarint(out, at, revision);
  }
  if (readsProgrammed) {
    out[at++] = 0x18; // EmptyOp.ReadsProgrammed, varint
    out[at] = 1;
  }
  return out;
}

export function resetFrame(instanceId: string): Frame {
  return emptyOpFrame(0x22 /* OpItem.Reset */, instanceId, 0);
}

/** `readsProgrammed`: the server reads this stream's Programmed reports (localv1). */
export function syncFrame(instanceId: string, revision: number, readsProgrammed = false): Frame {
  return emptyOpFrame(0x0a /* OpItem.Sync */, instanceId, revision, readsProgrammed);
}

/** A value on the wire: its bytes (to compare) and its Set op (to send). */
export interface WireValue {
  readonly bytes: Uint8Array;
  readonly frame: Frame;
}

export function wireValue(set: WireSet, path: string, bytes: Uint8Array): WireValue {
  const frame = setFrame(set, path, bytes);
  // The value ends the Set op: a view of it there lets the encoder's copy go.
  return { bytes: frame.subarray(frame.length - bytes.length), frame };
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a === b || Buffer.compare(a, b) === 0;
}
