// `kpng explain --rules ebpf`: the BPF map entries that implement one Service (each frontend's
// value in kpng_svc and the backend list in kpng_be it names), read key by key from the pinned
// maps and compared with what renderService gives for the brain's state of it. The frontends the
// Service has but the maps must not hold (a drop left to nft, source ranges, a family without a
// cluster IP) are checked to be absent. The nft rules the same process keeps for traffic from
// other machines are read by the companion's reader and reported alongside.

import { endpointString, type LocalService } from "../../model/local.ts";
import type { RulesReader, RulesReport } from "../../plugin/rules-reader.ts";
import type { Frontend } from "./layout.ts";
import { frontendAction, frontendName, lookupFrontend } from "./list.ts";
import { type LbMaps, mapPinPath } from "./maps.ts";
import { type RenderContext, renderService } from "./render.ts";

interface EbpfRulesReaderOptions {
  /** Opens the pinned maps (closed after each read). */
  readonly openMaps: () => LbMaps;
  readonly render: RenderContext;
  /** The bpffs mount, for the names of the maps in the report. */
  readonly bpfRoot: string;
  /** The reader of the nft rules that run beside the maps, if any. */
  readonly companion?: RulesReader;
}

/** Every address the Service could be reached on, whether rendered into the maps or not. */
function candidateFrontends(svc: LocalService, ctx: RenderContext): Frontend[] {
  const out: Frontend[] = [];
  for (const port of svc.ports) {
    const at = (ips: readonly string[], p: number) =>
      ips.map((ip) => ({ ip, port: p, protocol: port.protocol }));
    for (const f of svc.families)
      out.push(...at([f.clusterIP, ...f.externalIPs, ...f.loadBalancerIPs], port.port));
    if (port.nodePort > 0) out.push(...at([...ctx.nodePortIPs.IPv4, ...ctx.nodePortIPs.IPv6], port.nodePort));
  }
  return out;
}

const sorted = (list: readonly string[]) => [...list].sort();

export class EbpfRulesReader implements RulesReader {
  readonly #opts: EbpfRulesReaderOptions;

  constructor(opts: EbpfRulesReaderOptions) {
    this.#opts = opts;
  }

  async read(service: LocalService, signal: AbortSignal): Promise<RulesReport> {
    const objects: { kind: string; name: string; lines: string[] }[] = [];
    const drift: { object: string; expected: string; found: string }[] = [];
    const where = mapPinPath(this.#opts.bpfRoot, "services");
    const maps = this.#opts.openMaps();
    try {
      const expected = new Map<string, string>();
      for (const g of renderService(service, this.#opts.render)) {
        const want = frontendAction({ ...g, backends: sorted(g.backends.map(endpointString)) });
        for (const f of g.frontends) expected.set(frontendName(f), want);
      }
      const seen = new Set<string>();
      for (const f of candidateFrontends(service, this.#opts.render)) {
        const name = frontendName(f);
        if (seen.has(name)) continue;
        seen.add(name);
        const want = expected.get(name);
        const entry = lookupFrontend(maps, f);
        if (entry === undefined) {
          if (want === undefined) continue;
          objects.push({ kind: "bpf map entry", name: `${where} ${name}`, lines: ["(missing)"] });
          drift.push({ object: `bpf ${name}`, expected: want, found: "" });
          continue;
        }
        const found = frontendAction({ ...entry.listed, backends: sorted(entry.listed.backends) });
        const lines = [frontendAction(entry.listed), ...entry.stray.map((s) => `stray backend: ${s}`)];
        objects.push({ kind: "bpf map entry", name: `${where} ${name}`, lines });
        if (found !== want || entry.stray.length > 0)
          drift.push({
            object: `bpf ${name}`,
            expected: want ?? "",
            found: [found, ...entry.stray.map((s) => `stray backend: ${s}`)].join(" "),
          });
      }
    } finally {
      maps.close();
    }
    const nft = await this.#opts.companion?.read(service, signal);
    return {
      backend: "ebpf",
      objects: [...objects, ...(nft?.objects ?? [])],
      drift: [...drift, ...(nft?.drift ?? [])],
    };
  }
}
