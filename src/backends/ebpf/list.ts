// `kpng ebpf list [-o json]`: the Service maps as the kernel holds them, one line per frontend
// with the backend list its value names.

import { z } from "zod";
import type { Protocol } from "../../model/kube.ts";
import { endpointString } from "../../model/local.ts";
import type { ControllerPlugin } from "../../plugin/contracts.ts";
import { parseOptionsWith } from "../../plugin/options.ts";
import { UsageError } from "../../plugin/usage-error.ts";
import {
  type Backend,
  chunkBackends,
  chunksOf,
  decodeBackend,
  decodeChunkKey,
  decodeFrontend,
  decodeServiceValue,
  encodeChunkKey,
  encodeFrontend,
  type Frontend,
  listName,
  SVC_REJECT,
} from "./layout.ts";
import { type LbMaps, PinnedMaps } from "./maps.ts";

interface ListedFrontend {
  readonly address: string;
  readonly port: number;
  readonly protocol: Protocol;
  /** "ip:port" of each backend, in list order; empty when the frontend refuses. */
  readonly backends: string[];
  readonly reject: boolean;
  readonly affinitySeconds: number;
}

/** How often a frontend is read again while a sync beside the reader moves it to a newer list. */
const MAX_REREADS = 3;

/**
 * Every frontend in the maps, sorted by address, port and protocol. The backends are scanned
 * first, then the frontends: a frontend that a sync running meanwhile pointed at a new list is
 * read again by its key, as the programs read it, so no frontend is listed with half a list.
 */
export function listFrontends(maps: LbMaps): ListedFrontend[] {
  const lists = new Map<string, Backend[]>();
  for (const [k, v] of maps.entries("backends")) {
    const key = decodeChunkKey(k);
    const name = listName(key);
    const list = lists.get(name) ?? [];
    for (const [index, b] of chunkBackends(key, v)) list[index] = decodeBackend(b);
    lists.set(name, list);
  }
  const out: ListedFrontend[] = [];
  for (const [k, v] of maps.entries("services")) {
    const f = decodeFrontend(k);
    const value = decodeServiceValue(v);
    const list = lists.get(listName(value)) ?? [];
    if (!holdsAll(list, value.count)) {
      const reread = rereadFrontend(maps, f);
      if (reread !== undefined) out.push(reread);
      continue;
    }
    out.push({
      address: f.ip,
      port: f.port,
      protocol: f.protocol,
      backends: list.slice(0, value.count).map((b) => endpointString(b)),
      reject: (value.flags & SVC_REJECT) !== 0,
      affinitySeconds: value.affinitySeconds,
    });
  }
  return out.sort(
    (a, b) => a.address.localeCompare(b.address) || a.port - b.port || a.protocol.localeCompare(b.protocol),
  );
}

function holdsAll(list: readonly (Backend | undefined)[], count: number): boolean {
  for (let i = 0; i < count; i++) if (list[i] === undefined) return false;
  return true;
}

/** The frontend by its key until its list is all there; undefined when it was deleted. */
function rereadFrontend(maps: LbMaps, f: Frontend): ListedFrontend | undefined {
  let found: ListedFrontend | undefined;
  for (let i = 0; i < MAX_REREADS; i++) {
    found = lookupFrontend(maps, f)?.listed;
    if (found === undefined || !found.backends.includes("?")) break;
  }
  return found;
}

/**
 * One frontend read by its key (a lookup per entry, never a scan of the maps): undefined when the
 * map does not hold it. `stray` names backends of its list past the count the value gives.
 */
export function lookupFrontend(
  maps: LbMaps,
  f: Frontend,
): { listed: ListedFrontend; stray: string[] } | undefined {
  const raw = maps.get("services", encodeFrontend(f));
  if (raw === undefined) return undefined;
  const value = decodeServiceValue(raw);
  const found: (Backend | undefined)[] = [];
  // The chunks the count names, and the one after them, which must not exist.
  for (let chunk = 0; chunk <= chunksOf(value.count); chunk++) {
    const key = { id: value.id, gen: value.gen, chunk };
    const v = maps.get("backends", encodeChunkKey(key));
    if (v !== undefined) for (const [index, b] of chunkBackends(key, v)) found[index] = decodeBackend(b);
  }
  const backends: string[] = [];
  for (let index = 0; index < value.count; index++) {
    const b = found[index];
    backends.push(b === undefined ? "?" : endpointString(b));
  }
  const stray = found.slice(value.count).flatMap((b) => (b === undefined ? [] : [endpointString(b)]));
  return {
    listed: {
      address: f.ip,
      port: f.port,
      protocol: f.protocol,
      backends,
      reject: (value.flags & SVC_REJECT) !== 0,
      affinitySeconds: value.affinitySeconds,
    },
    stray,
  };
}

/** The frontend's address, as `ebpf list` and `explain --rules ebpf` print it. */
export function frontendName(f: Frontend): string {
  return `${endpointString(f)}/${f.protocol}`;
}

/** What a frontend does: its backends ("?" for a missing one) or "(reject)", and its affinity. */
export function frontendAction(f: Pick<ListedFrontend, "backends" | "reject" | "affinitySeconds">): string {
  const what = f.reject ? "(reject)" : f.backends.join(" ");
  return f.affinitySeconds > 0 ? `${what} affinity=${f.affinitySeconds}s` : what;
}

function formatFrontends(list: readonly ListedFrontend[]): string {
  const lines = list.map(
    (f) => `${frontendName({ ip: f.address, port: f.port, protocol: f.protocol })}\t${frontendAction(f)}`,
  );
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}

/** The pinned maps, or a UsageError (exit 2) saying that none are under `bpfRoot`. */
export function openPinnedMaps(bpfRoot: string): LbMaps {
  try {
    return new PinnedMaps(bpfRoot);
  } catch (err) {
    throw new UsageError(`no kpng maps under ${bpfRoot}/kpng/maps (--bpf-root): ${(err as Error).message}`);
  }
}

const listOptions = z.object({
  bpfRoot: z.string().min(1).default("/sys/fs/bpf"),
  output: z.enum(["text", "json"], { message: 'one of "text", "json"' }).default("text"),
});

export const ebpfListCommand: ControllerPlugin<z.output<typeof listOptions>> = {
  name: "ebpf list",
  description: "print the eBPF backend's Service maps as the kernel holds them",
  addOptions(cmd) {
    cmd
      .option("--bpf-root <dir>", "the bpffs mount kpng pins under", "/sys/fs/bpf")
      .option("-o, --output <format>", "text or json", "text");
  },
  parseOptions: (raw) => parseOptionsWith(listOptions, raw),
  async run(opts) {
    const maps = openPinnedMaps(opts.bpfRoot);
    const list = listFrontends(maps);
    process.stdout.write(
      opts.output === "json"
        ? `${JSON.stringify(list.map(({ address, port, protocol, backends }) => ({ address, port, protocol, backends })))}\n`
        : formatFrontends(list),
    );
  },
};
