// The eBPF sync loop, kept thin: it feeds the latest local state to the renderer and the map
// writer (only changed Services), runs a full sync at start and after a failure or a repair, and
// retries with a growing delay. The programs and pins come from the loader before a full sync.

import { Counter, Gauge, Histogram } from "prom-client";
import { sleep as sleepFor } from "../../lib/sleep.ts";
import type { LocalState, LocalStateFeed } from "../../model/local.ts";
import { serviceChanges } from "../../model/local-changes.ts";
import { NO_OBSERVER, type SyncObserver } from "../../node/sync-observer.ts";
import type { Logger } from "../../observability/log.ts";
import { registry } from "../../observability/metrics.ts";
import { type LbMaps, MapWriteError } from "./maps.ts";
import type { ProgramLoader } from "./programs.ts";
import { type RenderContext, type RenderedGroup, renderService } from "./render.ts";
import { MapWriter, type WriteReport } from "./writer.ts";

const syncDuration = new Histogram({
  name: "kpng_ebpf_sync_duration_seconds",
  help: "Time to bring the BPF maps in line with a new local state.",
  buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});

const syncFailures = new Counter({
  name: "kpng_ebpf_write_failures_total",
  help: "Map writes or program loads that failed; each one is retried with a full sync.",
  registers: [registry],
});

const mapFull = new Counter({
  name: "kpng_ebpf_map_full_total",
  help: "Writes refused because a BPF map holds its maximum entries (raise --bpf-map-*).",
  labelNames: ["map"] as const,
  registers: [registry],
});

const programmed = new Gauge({
  name: "kpng_ebpf_programmed",
  help: "1 when the BPF maps hold the latest local state, else 0.",
  registers: [registry],
});

interface EbpfBackendOptions {
  readonly loader: ProgramLoader;
  /** Opens the pinned maps (again after the loader re-created them). */
  readonly openMaps: () => LbMaps;
  readonly render: RenderContext;
  readonly log: Logger;
  /** The longest wait between two retries. */
  readonly syncPeriodMs?: number;
  readonly observer?: SyncObserver;
  /** Waits between retries; replaced by tests. */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

export class EbpfBackend {
  readonly #o: EbpfBackendOptions;
  #writer: MapWriter | undefined;
  #maps: LbMaps | undefined;
  #applied: LocalState | undefined;
  #needsFull = true;
  #lastError: string | undefined;
  #kick: (() => void) | undefined;

  constructor(options: EbpfBackendOptions) {
    this.#o = options;
    programmed.set(0);
  }

  /** Why the maps are not in line, or undefined when they are. */
  get problem(): string | undefined {
    return this.#lastError;
  }

  /** The pins or programs were removed or detached: reload what is missing and rewrite the maps. */
  forceFullSync(): void {
    this.#needsFull = true;
    this.#kick?.();
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
      if (err instanceof MapWriteError && err.full) mapFull.inc({ map: err.map });
      throw err;
    }
  }

  *#renderAll(state: LocalState): Generator<[string, readonly RenderedGroup[]]> {
    for (const [key, svc] of state.services) yield [key, renderService(svc, this.#o.render)];
  }

  *#renderChanged(state: LocalState): Generator<[string, readonly RenderedGroup[] | undefined]> {
    for (const [key, , svc] of serviceChanges(this.#applied, state)) {
      yield [key, svc === undefined ? undefined : renderService(svc, this.#o.render)];
    }
  }

  /** Follows the feed until `signal` aborts: the latest state is synced, failures retried. */
  async run(feed: LocalStateFeed, signal: AbortSignal): Promise<void> {
    const observer = this.#o.observer ?? NO_OBSERVER;
    const sleep = this.#o.sleep ?? sleepFor;
    const maxWait = this.#o.syncPeriodMs ?? 30_000;
    let latest: LocalState | undefined;
    let dirty = false;
    let wake: (() => void) | undefined;
    this.#kick = () => wake?.();
    const unsubscribe = feed.subscribe((state) => {
      latest = state;
      dirty = true;
      observer.queued(state);
      wake?.();
    });
    let retryMs = 0;
    try {
      while (!signal.aborted) {
        if (latest !== undefined && (dirty || this.#needsFull)) {
          const state = latest;
          dirty = false;
          try {
            const r = await this.sync(state);
            retryMs = 0;
            this.#o.log.debug({ revision: state.revision, ...r }, "maps synced");
            await observer.synced({ state, full: r.full, durationMs: 0 });
            continue;
          } catch (err) {
            retryMs = Math.min(maxWait, Math.max(500, retryMs * 2));
            const full = err instanceof MapWriteError && err.full;
            this.#o.log.error(
              { err: (err as Error).message, retryInMs: retryMs },
              full ? "a BPF map is full: raise its --bpf-map-* size" : "BPF sync failed",
            );
            observer.failed();
            await sleep(retryMs, signal);
            continue;
          }
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
          signal.addEventListener("abort", () => resolve(), { once: true });
        });
        wake = undefined;
      }
    } finally {
      this.#kick = undefined;
      unsubscribe();
      this.#maps?.close();
    }
  }
}
