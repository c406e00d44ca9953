// `kpng ebpf list [-o json]`: the Service maps as the kernel holds them, one line per frontend
// with the backend list its value names.

import { z } from "zod";
import { endpointString } from "../../model/local.ts";
import type { ControllerPlugin } from "../../plugin/contracts.ts";
import { parseOptionsWith } from "../../plugin/options.ts";
import { UsageError } from "../../plugin/usage-error.ts";
import {
  type Backend,
  decodeBackend,
  decodeFrontend,
  decodeServiceValue,
  decodeSlot,
  SVC_REJECT,
} from "./layout.ts";
import { type LbMaps, PinnedMaps } from "./maps.ts";

interface ListedFrontend {
  readonly address: string;
  readonly port: number;
  readonly protocol: string;
  /** "ip:port" of each backend, in slot order; empty when the frontend refuses. */
  readonly backends: string[];
  readonly reject: boolean;
  readonly affinitySeconds: number;
}

/** Every frontend in the maps, sorted by address, port and protocol. */
export function listFrontends(maps: LbMaps): ListedFrontend[] {
  const slots = new Map<string, Backend[]>();
  for (const [k, v] of maps.entries("backends")) {
    const s = decodeSlot(k);
    const key = `${s.id}/${s.gen}`;
    const list = slots.get(key) ?? [];
    list[s.index] = decodeBackend(v);
    slots.set(key, list);
  }
  const out: ListedFrontend[] = [];
  for (const [k, v] of maps.entries("services")) {
    const f = decodeFrontend(k);
    const value = decodeServiceValue(v);
    const list = slots.get(`${value.id}/${value.gen}`) ?? [];
    out.push({
      address: f.ip,
      port: f.port,
      protocol: f.protocol,
      backends: list.slice(0, value.count).map((b) => (b === undefined ? "?" : endpointString(b))),
      reject: (value.flags & SVC_REJECT) !== 0,
      affinitySeconds: value.affinitySeconds,
    });
  }
  return out.sort(
    (a, b) => a.address.localeCompare(b.address) || a.port - b.port || a.protocol.localeCompare(b.protocol),
  );
}

function formatFrontends(list: readonly ListedFrontend[]): string {
  const lines = list.map((f) => {
    const what = f.reject ? "(reject)" : f.backends.join(" ");
    const sticky = f.affinitySeconds > 0 ? ` affinity=${f.affinitySeconds}s` : "";
    return `${endpointString({ ip: f.address, port: f.port })}/${f.protocol}\t${what}${sticky}`;
  });
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
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
    let maps: LbMaps;
    try {
      maps = new PinnedMaps(opts.bpfRoot);
    } catch (err) {
      throw new UsageError(`no kpng maps under ${opts.bpfRoot}/kpng/maps: ${(err as Error).message}`);
    }
    const list = listFrontends(maps);
    process.stdout.write(
      opts.output === "json"
        ? `${JSON.stringify(list.map(({ address, port, protocol, backends }) => ({ address, port, protocol, backends })))}\n`
        : formatFrontends(list),
    );
  },
};
