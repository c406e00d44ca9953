// The binary layout of kpng's BPF maps, shared with bpf/kpng.bpf.c (the structs there): keys and
// values as the kernel holds them. Addresses and ports in network byte order, counters in the
// host's (little-endian on every architecture kpng ships for).

import ipaddr from "ipaddr.js";
import type { Protocol } from "../../model/kube.ts";

/** The maps the programs use, by the name they are pinned under `<bpf-root>/kpng/maps/`. */
export const MAPS = {
  services: { name: "kpng_svc", type: "hash", key: 20, value: 16, noPrealloc: true },
  backends: { name: "kpng_be", type: "hash", key: 8, value: 160, noPrealloc: true },
  affinity: { name: "kpng_aff", type: "lru_hash", key: 16, value: 28, noPrealloc: false },
  reverse: { name: "kpng_rev", type: "lru_hash", key: 32, value: 20, noPrealloc: false },
  /** One entry: the inode of the node's network namespace (localhost NodePorts are the node's). */
  node: { name: "kpng_node", type: "array", key: 4, value: 8, noPrealloc: false },
} as const;

/** Every map, in the order the loader creates and pins them. */
export const MAP_KEYS = ["services", "backends", "affinity", "reverse", "node"] as const;

/** The cgroup hooks, each with the program (pinned under `<bpf-root>/kpng/progs/`) attached to it. */
export const HOOKS = [
  "connect4",
  "connect6",
  "sendmsg4",
  "sendmsg6",
  "recvmsg4",
  "recvmsg6",
  "getpeername4",
  "getpeername6",
  "sock_release",
] as const;
export type Hook = (typeof HOOKS)[number];
export const programName = (hook: Hook): string => `kpng_${hook}`;

/** svc_val.flags: a frontend whose Service has no endpoints refuses connections. */
export const SVC_REJECT = 1;

const PROTOCOLS: Readonly<Record<string, number>> = { TCP: 6, UDP: 17, SCTP: 132 };
const PROTOCOL_NAMES: Readonly<Record<number, Protocol>> = { 6: "TCP", 17: "UDP", 132: "SCTP" };

/** A Service address as the programs see it: address, port, protocol. */
export interface Frontend {
  readonly ip: string;
  readonly port: number;
  readonly protocol: Protocol;
}

export interface Backend {
  readonly ip: string;
  readonly port: number;
}

/** Which backend list a frontend uses: its `count` backends, in chunks (id, gen, 0…) of the backends map. */
export interface ServiceValue {
  readonly id: number;
  readonly count: number;
  readonly gen: number;
  readonly affinitySeconds: number;
  readonly flags: number;
}

/**
 * Writes an address into `buf` at `off` (16 bytes: IPv4 in the first 4, the rest zeroed) and
 * returns its family (4 or 6). The local state's addresses are canonical; dotted quads (most of
 * them) are read character by character, without a parser or a regular expression.
 */
function writeAddress(buf: Buffer, off: number, ip: string): 4 | 6 {
  let octet = 0;
  let digits = 0;
  let at = off;
  for (let i = 0; i < ip.length; i++) {
    const c = ip.charCodeAt(i);
    if (c >= 48 && c <= 57 && digits < 3) {
      octet = octet * 10 + (c - 48);
      digits++;
    } else if (c === 46 && digits > 0 && octet <= 255 && at < off + 3) {
      buf[at++] = octet;
      octet = 0;
      digits = 0;
    } else {
      return writeParsed(buf, off, ip);
    }
  }
  if (digits === 0 || octet > 255 || at !== off + 3) return writeParsed(buf, off, ip);
  buf[at] = octet;
  for (let i = off + 4; i < off + 16; i++) buf[i] = 0;
  return 4;
}

function writeParsed(buf: Buffer, off: number, ip: string): 4 | 6 {
  const bytes = ipaddr.parse(ip).toByteArray();
  buf.fill(0, off, off + 16);
  for (let i = 0; i < bytes.length; i++) buf[off + i] = bytes[i]!;
  return bytes.length === 4 ? 4 : 6;
}

function readAddress(buf: Buffer, family: number): string {
  if (family === 4) return ipaddr.fromByteArray([...buf.subarray(0, 4)]).toString();
  return ipaddr.fromByteArray([...buf.subarray(0, 16)]).toString();
}

// Byte stores rather than Buffer's write methods: millions of entries at a cold start, and the
// offsets are the writer's own (within the batch buffers it made).
function u16le(buf: Buffer, off: number, v: number): void {
  buf[off] = v & 0xff;
  buf[off + 1] = (v >>> 8) & 0xff;
}

function u32le(buf: Buffer, off: number, v: number): void {
  buf[off] = v & 0xff;
  buf[off + 1] = (v >>> 8) & 0xff;
  buf[off + 2] = (v >>> 16) & 0xff;
  buf[off + 3] = (v >>> 24) & 0xff;
}

/** Writes a frontend's key (MAPS.services.key bytes) into `buf` at `off`. */
export function writeFrontend(buf: Buffer, off: number, f: Frontend): void {
  buf[off + 19] = writeAddress(buf, off, f.ip);
  buf[off + 16] = f.port >>> 8;
  buf[off + 17] = f.port & 0xff;
  buf[off + 18] = PROTOCOLS[f.protocol] ?? 0;
}

export function encodeFrontend(f: Frontend): Buffer {
  const b = Buffer.allocUnsafe(MAPS.services.key);
  writeFrontend(b, 0, f);
  return b;
}

export function decodeFrontend(b: Buffer): Frontend {
  return {
    ip: readAddress(b, b[19]!),
    port: b.readUInt16BE(16),
    protocol: PROTOCOL_NAMES[b[18]!] ?? "TCP",
  };
}

/** Writes a frontend's value (MAPS.services.value bytes) into `buf` at `off`. */
export function writeServiceValue(buf: Buffer, off: number, v: ServiceValue): void {
  u32le(buf, off, v.id);
  u16le(buf, off + 4, v.count);
  u16le(buf, off + 6, v.gen);
  u32le(buf, off + 8, v.affinitySeconds);
  u32le(buf, off + 12, v.flags);
}

export function decodeServiceValue(b: Buffer): ServiceValue {
  return {
    id: b.readUInt32LE(0),
    count: b.readUInt16LE(4),
    gen: b.readUInt16LE(6),
    affinitySeconds: b.readUInt32LE(8),
    flags: b.readUInt32LE(12),
  };
}

/** Bytes of one backend (address, port, family) within a chunk. */
export const BACKEND_BYTES = 20;

/** The byte of a backend that holds its address family (4 or 6; 0 past a list's count). */
export const BACKEND_FAMILY = 18;

/**
 * Backends per entry of the backends map (bpf/kpng.bpf.c CHUNK): the kernel's cost of a write is
 * per entry, whatever its size. Past the list's count, the last chunk is zeros.
 */
export const BACKENDS_PER_CHUNK = MAPS.backends.value / BACKEND_BYTES;

/** The entries of the backends map a list of `count` backends takes. */
export const chunksOf = (count: number): number => Math.ceil(count / BACKENDS_PER_CHUNK);

interface ChunkKey {
  readonly id: number;
  readonly gen: number;
  /** Backends chunk*BACKENDS_PER_CHUNK … of the list. */
  readonly chunk: number;
}

/** A backend list's name, "id/gen": how the writer, the listing and the UDP cut know a list. */
export const listName = (l: { readonly id: number; readonly gen: number }): string => `${l.id}/${l.gen}`;

/** Writes a chunk's key (MAPS.backends.key bytes) into `buf` at `off`. */
export function writeChunkKey(buf: Buffer, off: number, id: number, gen: number, chunk: number): void {
  u32le(buf, off, id);
  u16le(buf, off + 4, gen);
  u16le(buf, off + 6, chunk);
}

export function encodeChunkKey(k: ChunkKey): Buffer {
  const b = Buffer.allocUnsafe(MAPS.backends.key);
  writeChunkKey(b, 0, k.id, k.gen, k.chunk);
  return b;
}

export function decodeChunkKey(b: Buffer): ChunkKey {
  return { id: b.readUInt32LE(0), gen: b.readUInt16LE(4), chunk: b.readUInt16LE(6) };
}

/**
 * The backends a chunk holds, each as its BACKEND_BYTES, by index in the list; the zeros past the
 * list's count are left out.
 */
export function* chunkBackends(key: ChunkKey, value: Buffer): Generator<[number, Buffer]> {
  for (let i = 0; i < BACKENDS_PER_CHUNK; i++) {
    const at = i * BACKEND_BYTES;
    if (value[at + BACKEND_FAMILY] === 0) continue;
    yield [key.chunk * BACKENDS_PER_CHUNK + i, value.subarray(at, at + BACKEND_BYTES)];
  }
}

/** Writes a backend (BACKEND_BYTES) into `buf` at `off`. */
export function writeBackend(buf: Buffer, off: number, be: Backend): void {
  buf[off + BACKEND_FAMILY] = writeAddress(buf, off, be.ip);
  buf[off + 16] = be.port >>> 8;
  buf[off + 17] = be.port & 0xff;
  buf[off + 19] = 0;
}

export function decodeBackend(b: Buffer): Backend {
  return { ip: readAddress(b, b[BACKEND_FAMILY]!), port: b.readUInt16BE(16) };
}

/** Backends a list may hold: the programs pick among at most this many (MAX_BACKENDS). */
export const MAX_BACKENDS_PER_SERVICE = 1024;
