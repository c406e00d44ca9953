// The eBPF backend as the shared sync loop (backend-core/sync-loop.ts) drives it: one "family"
// (the maps serve IPv4 and IPv6 alike) whose apply feeds the latest local state to the renderer
// and the map writer (only changed Services), with a full sync at start and after a failure or
// a repair (forget). The programs and pins come from the loader before a full sync.

import type { BackendFamily } from "../../backend-core/sync-loop.ts";
import { IP_FAMILIES } from "../../model/ip.ts";
import type { LocalState } from "../../model/local.ts";
import { serviceChanges } from "../../model/local-changes.ts";
import type { Logger } from "../../observability/log.ts";
import { counter, gauge, histogram } from "../../observability/metrics.ts";
import { type LbMaps, MapWriteError } from "./maps.ts";
import type { ProgramLoader } from "./programs.ts";
import { type RenderContext, type RenderedGroup, renderService } from "./render.ts";
import { MapWriter, type WriteReport } from "./writer.ts";

const syncDuration = histogram(
  "kpng_ebpf_sync_duration_seconds",
  "Time to bring the BPF maps in line with a new local state.",
  [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10],
);

const syncFailures = counter(
  "kpng_ebpf_write_failures_total",
  "Map writes or program loads that failed; each one is retried with a full sync.",
);

const mapFull = counter(
  "kpng_ebpf_map_full_total",
  "Writes refused because a BPF map holds its maximum entries (raise --bpf-map-*).",
  ["map"],
);

const programmed = gauge("kpng_ebpf_programmed", "1 when the BPF maps hold the latest local state, else 0.");

interface EbpfBackendOptions {
  readonly loader: ProgramLoader;
  /** Opens the pinned maps (again after the loader re-created them). */
  readonly openMaps: () => LbMaps;
  readonly render: RenderContext;
  readonly log: Logger;
}

export class EbpfBackend {
  readonly #o: EbpfBackendOptions;
  #writer: MapWriter | undefined;
  #maps: LbMaps | undefined;
  #applied: LocalState | undefined;
  #needsFull = true;
  #lastError: string | undefined;
  #render: RenderContext;

  constructor(options: EbpfBackendOptions) {
    this.#o = options;
    this.#render = options.render;
    programmed.set(0);
  }

  /**
   * New NodePort addresses: the next sync is a full one, which rewrites every Service's entries
   * over what the maps hold (entries that stay are never removed).
   */
  reconfigure(render: RenderContext): void {
    this.#render = render;
    this.#needsFull = true;
  }

  /** Why the maps are not in line, or undefined when they are. */
  get problem(): string | undefined {
    return this.#lastError;
  }

  /** One sync to `state`: full (loader, then every Service) or of the changed Services only. */
  async sync(state: LocalState): Promise<WriteReport & { readonly full: boolean }> {
    const started = performance.now();
    const full = this.#needsFull || this.#writer === undefined;
    try {
      let report: WriteReport;
      if (full) {
        const done = await this.#o.loader.ensure();
        if (done.length > 0) this.#o.log.info({ done }, "BPF programs and maps in place");
        this.#maps?.close();
        this.#maps = this.#o.openMaps();
        this.#writer = new MapWriter(this.#maps);
        this.#needsFull = false;
        report = this.#writer.fullSync(this.#renderAll(state));
      } else {
        report = this.#writer!.update(this.#renderChanged(state));
      }
      this.#applied = state;
      this.#lastError = undefined;
      programmed.set(1);
      syncDuration.observe((performance.now() - started) / 1000);
      return { ...report, full };
    } catch (err) {
      this.#needsFull = true;
      this.#lastError = (err as Error).message;
      programmed.set(0);
      syncFailures.inc();
      if (err instanceof MapWriteError && err.full) {
        mapFull.inc({ map: err.map });
        this.#o.log.error({ map: err.map }, "a BPF map is full: raise its --bpf-map-* size");
      }
      throw err;
    }
  }

  *#renderAll(state: LocalState): Generator<[string, readonly RenderedGroup[]]> {
    for (const [key, svc] of state.services) yield [key, renderService(svc, this.#render)];
  }

  *#renderChanged(state: LocalState): Generator<[string, readonly RenderedGroup[] | undefined]> {
    for (const [key, , svc] of serviceChanges(this.#applied, state)) {
      yield [key, svc === undefined ? undefined : renderService(svc, this.#render)];
    }
  }

  /** This backend as one family of the shared sync loop. */
  asFamily(): BackendFamily {
    return {
      family: "maps",
      // One write serves both families.
      ipFamilies: IP_FAMILIES,
      apply: async (state) => ({ full: (await this.sync(state)).full, texts: [] }),
      forget: () => {
        this.#needsFull = true;
      },
    };
  }
}
