// The eBPF backend as the shared sync loop (backend-core/sync-loop.ts) drives it: one family per
// IP family, each synced, timed and retried on its own as nft's and iptables' are. The maps serve
// both families; each family has its own writer, which owns that family's frontends and lists
// (writer.ts). A family's apply feeds the latest local state to the renderer and its writer (only
// changed Services), with a full sync at start and after a failure or a repair (forget). The
// programs and pins come from the loader before a full sync; the programs it leaves unattached
// (loaded against new maps, or found so at start) are attached once every family has written
// the maps.

import type { BackendFamily } from "../../backend-core/sync-loop.ts";
import { IP_FAMILIES } from "../../model/ip.ts";
import type { IPFamily } from "../../model/kube.ts";
import type { LocalState } from "../../model/local.ts";
import { serviceChanges } from "../../model/local-changes.ts";
import type { Logger } from "../../observability/log.ts";
import { counter, gauge } from "../../observability/metrics.ts";
import { type LbMaps, MapWriteError } from "./maps.ts";
import { CREATED_MAP, NO_UDP_DESTROY, type ProgramLoader, UDP_DESTROY_RETRY } from "./programs.ts";
import { type RenderContext, type RenderedGroup, renderService } from "./render.ts";
import {
  type GoneFlow,
  goneFromMaps,
  goneUdpFlows,
  keepUdpFlows,
  type UdpSocketDestroyer,
} from "./udp-destroy.ts";
import { type Adopted, MapWriter, readMaps, type WriteReport } from "./writer.ts";

const syncFailures = counter(
  "kpng_ebpf_write_failures_total",
  "Map writes or program loads that failed; each one is retried with a full sync.",
);

const mapFull = counter(
  "kpng_ebpf_map_full_total",
  "Writes refused because a BPF map holds its maximum entries (raise --bpf-map-*).",
  ["map"],
);

const programmed = gauge(
  "kpng_ebpf_programmed",
  "1 when the BPF maps hold the latest local state of both IP families, else 0.",
);

interface EbpfBackendOptions {
  readonly loader: ProgramLoader;
  /** Opens the pinned maps (again after the loader re-created them). */
  readonly openMaps: () => LbMaps;
  readonly render: RenderContext;
  readonly log: Logger;
  /** Cuts the node's UDP sockets connected to endpoints a sync removed (udp-destroy.ts). */
  readonly udpSockets?: UdpSocketDestroyer;
}

/** What one sync of one or both families wrote. */
type SyncReport = WriteReport & { readonly full: boolean };

/** One IP family's share of the maps. */
interface FamilyWrites {
  readonly family: IPFamily;
  writer: MapWriter | undefined;
  maps: LbMaps | undefined;
  applied: LocalState | undefined;
  needsFull: boolean;
  lastError: string | undefined;
  /** The maps' generation this family's entries are in (see #mapsGeneration). */
  generation: number;
}

const ADDRESS_FAMILY = { IPv4: 4, IPv6: 6 } as const;

export class EbpfBackend {
  readonly #o: EbpfBackendOptions;
  readonly #families: ReadonlyMap<IPFamily, FamilyWrites>;
  /** Counts the loader's re-creations of the maps: the entries written before are gone. */
  #mapsGeneration = 0;
  /**
   * The loader's last ensure(), shared by the families' full syncs until a family is forgotten
   * or fails: at start and after a repair the first family puts the programs and maps in place,
   * and the other one does not ask bpftool again.
   */
  #ensured: Promise<void> | undefined;
  /**
   * Shares of one read of the maps kept for the families whose full sync is still to come in
   * this round: each family writes only its own entries, so its share stays what the maps hold
   * of it until it syncs. Dropped with #ensured.
   */
  readonly #reads = new Map<IPFamily, Adopted>();
  #render: RenderContext;
  /** The UDP socket iterator's load in progress. */
  #iterator: Promise<void> | undefined;

  constructor(options: EbpfBackendOptions) {
    this.#o = options;
    this.#render = options.render;
    this.#families = new Map(
      IP_FAMILIES.map((family) => [
        family,
        {
          family,
          writer: undefined,
          maps: undefined,
          applied: undefined,
          needsFull: true,
          lastError: undefined,
          generation: 0,
        },
      ]),
    );
    programmed.set(0);
  }

  /**
   * New NodePort addresses: the next sync is a full one, which rewrites every Service's entries
   * over what the maps hold (entries that stay are never removed).
   */
  reconfigure(render: RenderContext): void {
    this.#render = render;
    for (const f of this.#families.values()) f.needsFull = true;
  }

  /** Why the maps are not in line, or undefined when they are. */
  get problem(): string | undefined {
    for (const f of this.#families.values()) if (f.lastError !== undefined) return f.lastError;
    return undefined;
  }

  /** Whether the maps were re-created since `family` last wrote them (its entries are gone). */
  stale(family: string): boolean {
    const f = this.#families.get(family as IPFamily);
    return f?.writer !== undefined && f.generation !== this.#mapsGeneration;
  }

  /**
   * Puts the programs and maps in place now, while the source and the brain work towards the
   * first state: loading and attaching take `bpftool` a second or more, which the first sync
   * would otherwise wait for. A failure surfaces at the first sync, which tries again.
   */
  prepare(): void {
    if (this.#ensured !== undefined) return;
    const ensured = this.#ensure();
    ensured.catch(() => {});
    this.#ensured = ensured;
  }

  /** One sync of both families to `state`, one after the other; throws the first failure. */
  async sync(state: LocalState): Promise<SyncReport> {
    const reports: SyncReport[] = [];
    const errors: unknown[] = [];
    for (const family of IP_FAMILIES) {
      await this.syncFamily(family, state).then(
        (r) => reports.push(r),
        (e: unknown) => errors.push(e),
      );
    }
    if (errors.length > 0) throw errors[0];
    const sum = (k: keyof WriteReport) => reports.reduce((n, r) => n + r[k], 0);
    return {
      full: reports.some((r) => r.full),
      services: sum("services"),
      frontendsWritten: sum("frontendsWritten"),
      frontendsDeleted: sum("frontendsDeleted"),
      backendsWritten: sum("backendsWritten"),
      backendsDeleted: sum("backendsDeleted"),
    };
  }

  /** One sync of one family to `state`: full (loader, then every Service) or of the changed Services only. */
  async syncFamily(family: IPFamily, state: LocalState): Promise<SyncReport> {
    const f = this.#families.get(family)!;
    const full = f.needsFull || f.writer === undefined;
    const started = performance.now();
    try {
      let report: WriteReport;
      const gone: GoneFlow[] = [];
      if (full) {
        this.#ensured ??= this.#ensure();
        await this.#ensured;
        f.maps?.close();
        f.maps = this.#o.openMaps();
        f.writer = new MapWriter(f.maps, { family: ADDRESS_FAMILY[family] });
        f.generation = this.#mapsGeneration;
        f.needsFull = false;
        const read = this.#reads.get(family) ?? this.#readFor(family, f.maps);
        this.#reads.delete(family);
        // What the maps held is the state before this one (a run before a restart, or the
        // write before a repair): its UDP pairs the new state drops are gone as well. Empty maps
        // (a first start) hold none, and the new state's pairs need not be gathered.
        const kept =
          this.#o.udpSockets === undefined || read.byFrontend.size === 0 ? undefined : new Set<string>();
        report = f.writer.fullSync(this.#renderAll(state, family, kept), read);
        if (kept !== undefined) gone.push(...goneFromMaps(read, kept));
        // What the loader left for attach(), if anything, once every family has written the maps.
        if (this.#allWritten()) await this.#attach();
      } else {
        report = f.writer!.update(this.#renderChanged(f, state, gone));
      }
      // The maps no longer name them: a socket connected again gets a live endpoint.
      if (gone.length > 0) this.#o.udpSockets?.destroy(gone);
      f.applied = state;
      f.lastError = undefined;
      programmed.set(this.#inLine() ? 1 : 0);
      if (report.frontendsWritten + report.frontendsDeleted + report.backendsDeleted > 0 || full) {
        const ms = Math.round(performance.now() - started);
        this.#o.log.debug({ family, revision: state.revision, full, ms, ...report }, "ebpf maps synced");
      }
      return { ...report, full };
    } catch (err) {
      this.#dropShared();
      f.needsFull = true;
      f.lastError = (err as Error).message;
      programmed.set(0);
      syncFailures.inc();
      if (err instanceof MapWriteError && err.full) {
        mapFull.inc({ map: err.map });
        this.#o.log.error({ map: err.map, family }, "a BPF map is full: raise its --bpf-map-* size");
      }
      throw err;
    }
  }

  /** One read of the maps: `family`'s share, and the shares of the others waiting for a full sync. */
  #readFor(family: IPFamily, maps: LbMaps): Adopted {
    const waiting = [...this.#families.values()].filter((o) => o.family !== family && o.needsFull);
    const scopes = [family, ...waiting.map((o) => o.family)].map((x) => ADDRESS_FAMILY[x]);
    const read = readMaps(maps, scopes);
    for (const o of waiting) this.#reads.set(o.family, read.get(ADDRESS_FAMILY[o.family])!);
    return read.get(ADDRESS_FAMILY[family])!;
  }

  async #ensure(): Promise<void> {
    const done = await this.#o.loader.ensure();
    if (done.length > 0) this.#o.log.info({ done }, "BPF programs and maps in place");
    if (done.some((d) => d.startsWith(CREATED_MAP))) this.#mapsGeneration++;
    this.#iterator ??= this.#ensureIterator().finally(() => {
      this.#iterator = undefined;
    });
  }

  /** Whether every family has written the maps since the loader last created them. */
  #allWritten(): boolean {
    for (const f of this.#families.values())
      if (f.writer === undefined || f.needsFull || f.generation !== this.#mapsGeneration) return false;
    return true;
  }

  async #attach(): Promise<void> {
    const done = await this.#o.loader.attach();
    if (done.length > 0) this.#o.log.info({ done }, "BPF programs attached to the written maps");
  }

  /** The UDP socket iterator, after the programs and without holding up the sync. */
  async #ensureIterator(): Promise<void> {
    const done = (await this.#o.loader.ensureUdpDestroy?.()) ?? [];
    const missing = done.find((d) => d.startsWith(NO_UDP_DESTROY));
    if (missing !== undefined)
      this.#o.log.warn(
        { reason: missing },
        "connected UDP sockets keep an endpoint that left its Service (bpf_sock_destroy needs Linux 6.5)",
      );
    else if (done.some((d) => d.startsWith(UDP_DESTROY_RETRY)))
      this.#o.log.warn({ done }, "the UDP socket iterator could not be pinned: the repair tries again");
    else if (done.length > 0) this.#o.log.info({ done }, "UDP socket iterator in place");
  }

  /** Resolves once the UDP socket iterator's load (started by a full sync) is over. */
  async iteratorSettled(): Promise<void> {
    await this.#iterator;
  }

  /** What the families shared in this round no longer holds: the next full sync looks again. */
  #dropShared(): void {
    this.#ensured = undefined;
    this.#reads.clear();
  }

  #inLine(): boolean {
    for (const f of this.#families.values()) if (f.needsFull || f.lastError !== undefined) return false;
    return true;
  }

  /** Every Service's groups; their UDP (frontend, endpoint) pairs go into `kept` when given. */
  *#renderAll(
    state: LocalState,
    family: IPFamily,
    kept: Set<string> | undefined,
  ): Generator<[string, readonly RenderedGroup[]]> {
    for (const [key, svc] of state.services) {
      const groups = renderService(svc, this.#render, family);
      if (kept !== undefined) keepUdpFlows(groups, kept);
      yield [key, groups];
    }
  }

  /** The changed Services' groups; the UDP (frontend, endpoint) pairs they dropped go into `gone`. */
  *#renderChanged(
    f: FamilyWrites,
    state: LocalState,
    gone: GoneFlow[],
  ): Generator<[string, readonly RenderedGroup[] | undefined]> {
    for (const [key, prev, svc] of serviceChanges(f.applied, state)) {
      const groups = svc === undefined ? undefined : renderService(svc, this.#render, f.family);
      if (this.#o.udpSockets !== undefined && prev !== undefined)
        gone.push(...goneUdpFlows(prev, svc, f.family));
      yield [key, groups];
    }
  }

  /** This backend as the shared sync loop's families: one per IP family. */
  asFamilies(): BackendFamily[] {
    return IP_FAMILIES.map((family) => ({
      family,
      ipFamilies: [family],
      apply: async (state) => ({
        full: (await this.syncFamily(family, state)).full,
        transactions: 0,
        bytes: 0,
      }),
      forget: () => {
        this.#families.get(family)!.needsFull = true;
        this.#dropShared();
      },
    }));
  }
}
