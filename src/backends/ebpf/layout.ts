// The binary layout of kpng's BPF maps, shared with bpf/kpng.bpf.c (the structs there): keys and
// values as the kernel holds them. Addresses and ports in network byte order, counters in the
// host's (little-endian on every architecture kpng ships for).

import ipaddr from "ipaddr.js";
import type { Protocol } from "../../model/kube.ts";

/** The maps the programs use, by the name they are pinned under `<bpf-root>/kpng/maps/`. */
export const MAPS = {
  services: { name: "kpng_svc", type: "hash", key: 20, value: 16, noPrealloc: true },
  backends: { name: "kpng_be", type: "hash", key: 8, value: 20, noPrealloc: true },
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

/** Which backend list a frontend uses: slots (id, gen, 0…count-1) of the backends map. */
export interface ServiceValue {
  readonly id: number;
  readonly count: number;
  readonly gen: number;
  readonly affinitySeconds: number;
  readonly flags: number;
}

const DOTTED_QUAD = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function writeAddress(buf: Buffer, ip: string): 4 | 6 {
  // The local state's addresses are canonical; dotted quads (most of them) skip the parser.
  const quad = DOTTED_QUAD.exec(ip);
  if (quad !== null) {
    for (let i = 0; i < 4; i++) buf[i] = Number(quad[i + 1]);
    return 4;
  }
  const bytes = ipaddr.parse(ip).toByteArray();
  for (let i = 0; i < bytes.length; i++) buf[i] = bytes[i]!;
  return bytes.length === 4 ? 4 : 6;
}

/** A zeroed buffer from Node's pool: millions of small keys would otherwise each be an allocation. */
const zeroed = (size: number): Buffer => Buffer.allocUnsafe(size).fill(0);

function readAddress(buf: Buffer, family: number): string {
  if (family === 4) return ipaddr.fromByteArray([...buf.subarray(0, 4)]).toString();
  return ipaddr.fromByteArray([...buf.subarray(0, 16)]).toString();
}

export function encodeFrontend(f: Frontend): Buffer {
  const b = zeroed(MAPS.services.key);
  b[19] = writeAddress(b, f.ip);
  b.writeUInt16BE(f.port, 16);
  b[18] = PROTOCOLS[f.protocol] ?? 0;
  return b;
}

export function decodeFrontend(b: Buffer): Frontend {
  return {
    ip: readAddress(b, b[19]!),
    port: b.readUInt16BE(16),
    protocol: PROTOCOL_NAMES[b[18]!] ?? "TCP",
  };
}

export function encodeServiceValue(v: ServiceValue): Buffer {
  const b = zeroed(MAPS.services.value);
  b.writeUInt32LE(v.id, 0);
  b.writeUInt16LE(v.count, 4);
  b.writeUInt16LE(v.gen, 6);
  b.writeUInt32LE(v.affinitySeconds, 8);
  b.writeUInt32LE(v.flags, 12);
  return b;
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

interface Slot {
  readonly id: number;
  readonly gen: number;
  readonly index: number;
}

export function encodeSlot(s: Slot): Buffer {
  const b = zeroed(MAPS.backends.key);
  b.writeUInt32LE(s.id, 0);
  b.writeUInt16LE(s.gen, 4);
  b.writeUInt16LE(s.index, 6);
  return b;
}

export function decodeSlot(b: Buffer): Slot {
  return { id: b.readUInt32LE(0), gen: b.readUInt16LE(4), index: b.readUInt16LE(6) };
}

export function encodeBackend(be: Backend): Buffer {
  const b = zeroed(MAPS.backends.value);
  b[18] = writeAddress(b, be.ip);
  b.writeUInt16BE(be.port, 16);
  return b;
}

export function decodeBackend(b: Buffer): Backend {
  return { ip: readAddress(b, b[18]!), port: b.readUInt16BE(16) };
}

/** Backends a list may hold: the programs pick among at most this many (MAX_BACKENDS). */
export const MAX_BACKENDS_PER_SERVICE = 1024;
