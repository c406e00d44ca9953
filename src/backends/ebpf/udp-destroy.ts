// Connected UDP sockets to endpoints that left their Service. connect() translated the Service
// address once, so such a socket keeps sending to the endpoint it got; with to-nft the removed
// endpoint's conntrack entries go and the next datagram is balanced again. Here the node's UDP
// sockets connected to a gone endpoint are destroyed instead (bpf/udp-destroy.bpf.c, a UDP
// socket iterator calling bpf_sock_destroy): their next send fails, and a client that connects
// again gets a live endpoint. An iterator walks the sockets of the network namespace it is read
// from: kpng reads it in its own (the node's) and, through nsenter, in each other namespace of
// the processes in the balanced cgroup tree (the pods). kpng puts the gone (address, port) pairs in the iterator's map,
// runs the iterator by reading its pinned file, and empties the map again. Runs are queued and
// made in the background, one at a time, after the maps no longer name those endpoints.

import { existsSync, statSync } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { createMapRef, objGet, RawMap } from "bpf";
import { execCommand } from "../../host/exec.ts";
import { goneEndpoints } from "../../model/gone-endpoints.ts";
import type { IPFamily } from "../../model/kube.ts";
import type { LocalService } from "../../model/local.ts";
import type { Logger } from "../../observability/log.ts";
import { counter } from "../../observability/metrics.ts";
import { type Backend, decodeBackend, MAPS, writeBackend } from "./layout.ts";
import type { RenderedGroup } from "./render.ts";
import type { Adopted } from "./writer.ts";

/** The iterator's object, next to kpng.bpf.o (a kernel without bpf_sock_destroy refuses only it). */
export const UDP_DESTROY_OBJECT = "kpng-udp-destroy.bpf.o";
/** The iterator's map of gone endpoints: keys laid out as the backends map's values. */
export const UDP_GONE_MAP = "kpng_udp_gone";
/** The map's size (bpf/udp-destroy.bpf.c): endpoints per run. */
const MAX_PER_RUN = 4096;
/** Endpoints waiting beyond this are dropped (counted): their sockets keep their endpoint. */
const MAX_PENDING = 65_536;
const RUN_TIMEOUT_MS = 5_000;
/** Network namespaces (pods) walked per run beyond kpng's own; more are logged and left. */
const MAX_NAMESPACES = 1_024;
/** Processes of the cgroup tree looked at per run to find them. */
const MAX_PROCESSES = 65_536;

/** The programs a run starts: the iterator is read from inside each pod's network namespace. */
export const UDP_DESTROY_BINARIES: readonly string[] = ["nsenter", "cat"];

const destroyed = counter(
  "kpng_ebpf_udp_sockets_destroyed_total",
  "Connected UDP sockets destroyed because their endpoint left its Service.",
);

const failures = counter(
  "kpng_ebpf_udp_socket_destroy_failures_total",
  "Runs of the UDP socket iterator that failed or timed out, sockets it could not destroy, and gone endpoints dropped from a full queue.",
);

/** Where the iterator's pins live under `<bpf-root>/kpng/`. */
export function udpDestroyPins(bpfRoot: string): { dir: string; iterator: string; map: string } {
  const dir = join(bpfRoot, "kpng", "udp-destroy");
  return { dir, iterator: join(dir, "iter"), map: join(dir, UDP_GONE_MAP) };
}

export interface DestroyResult {
  readonly destroyed: number;
  readonly failed: number;
}

/** One run over the node's UDP sockets. */
export interface SocketDestroyRunner {
  /**
   * Destroys the sockets connected to any of `endpoints` (at most MAX_PER_RUN); undefined when the
   * iterator is not in place (a kernel without bpf_sock_destroy). Throws when the run fails.
   */
  run(endpoints: readonly Backend[]): Promise<DestroyResult | undefined>;
}

/** The kernel's: the pinned map and iterator, read in the node's namespace and in each pod's. */
export class PinnedUdpDestroyer implements SocketDestroyRunner {
  readonly #pins: ReturnType<typeof udpDestroyPins>;
  readonly #cgroupRoot: string;
  readonly #log: Logger;

  constructor(bpfRoot: string, cgroupRoot: string, log: Logger) {
    this.#pins = udpDestroyPins(bpfRoot);
    this.#cgroupRoot = cgroupRoot;
    this.#log = log;
  }

  async run(endpoints: readonly Backend[]): Promise<DestroyResult | undefined> {
    if (!existsSync(this.#pins.iterator) || !existsSync(this.#pins.map)) return undefined;
    const map = new RawMap(createMapRef(objGet(this.#pins.map), { transfer: true }));
    const keys = endpoints.map((e) => {
      const key = Buffer.alloc(MAPS.backends.value);
      writeBackend(key, 0, e);
      return key;
    });
    const one = Buffer.from([1]);
    try {
      // Runs never overlap, so whatever the map holds now was left by one that did not finish
      // (kpng stopped in between): those endpoints are not this run's to cut.
      map.clear();
      for (const key of keys) map.set(key, one);
      // An iterator walks the sockets of the namespace it is read from: the node's first.
      const own = await readFile(this.#pins.iterator, {
        encoding: "utf8",
        signal: AbortSignal.timeout(RUN_TIMEOUT_MS),
      });
      let result = destroyResults(own);
      let namespaceFailures = 0;
      for (const pid of await this.#podNamespaces()) {
        const r = await execCommand(
          ["nsenter", `--net=/proc/${pid}/ns/net`, "--", "cat", this.#pins.iterator],
          {
            timeoutMs: RUN_TIMEOUT_MS,
          },
        );
        // A process that ended in between took its namespace along (or left it to another).
        if (r.code !== 0 || r.timedOut) {
          if (existsSync(`/proc/${pid}`)) namespaceFailures++;
          continue;
        }
        const more = destroyResults(r.stdout);
        result = { destroyed: result.destroyed + more.destroyed, failed: result.failed + more.failed };
      }
      if (namespaceFailures > 0) {
        this.#log.warn(
          { namespaces: namespaceFailures },
          "the UDP socket iterator failed in pod network namespaces",
        );
        result = { ...result, failed: result.failed + namespaceFailures };
      }
      return result;
    } finally {
      for (const key of keys) {
        try {
          map.delete(key);
        } catch {
          // not written: the run failed before it (the error is already on its way)
        }
      }
    }
  }

  /** One process of each network namespace in the cgroup tree other than kpng's own. */
  async #podNamespaces(): Promise<number[]> {
    const seen = new Set<bigint>([statSync("/proc/self/ns/net", { bigint: true }).ino]);
    const pids: number[] = [];
    let looked = 0;
    const dirs = [this.#cgroupRoot];
    while (dirs.length > 0 && looked < MAX_PROCESSES && pids.length < MAX_NAMESPACES) {
      const dir = dirs.pop()!;
      const procs = await readFile(join(dir, "cgroup.procs"), "utf8").catch(() => "");
      for (const line of procs.split("\n")) {
        if (line === "" || ++looked > MAX_PROCESSES || pids.length >= MAX_NAMESPACES) continue;
        const ino = await stat(`/proc/${line}/ns/net`, { bigint: true }).then(
          (st) => st.ino,
          () => undefined,
        );
        if (ino === undefined || seen.has(ino)) continue;
        seen.add(ino);
        pids.push(Number(line));
      }
      for (const e of await readdir(dir, { withFileTypes: true }).catch(() => []))
        if (e.isDirectory()) dirs.push(join(dir, e.name));
    }
    if (looked > MAX_PROCESSES || pids.length >= MAX_NAMESPACES)
      this.#log.warn(
        { looked, namespaces: pids.length },
        "too many processes or namespaces: the UDP socket iterator walked only some pods",
      );
    return pids;
  }
}

const endpointKey = (b: Backend) => `${b.ip} ${b.port}`;

/**
 * The UDP endpoints of `family` that left the Service (model/gone-endpoints.ts), as the iterator
 * matches sockets: by peer alone, so an endpoint another UDP port of the Service still uses is
 * kept (a socket connected to it may still be right).
 */
export function goneUdpPeers(
  prev: LocalService,
  next: LocalService | undefined,
  family: IPFamily,
): Backend[] {
  const kept = new Set<string>();
  for (const p of next?.ports ?? [])
    if (p.protocol === "UDP")
      for (const e of [...p.internalEndpoints, ...p.externalEndpoints]) kept.add(endpointKey(e));
  const gone = new Map<string, Backend>();
  for (const g of goneEndpoints(prev, next)) {
    if (g.protocol !== "UDP" || g.family !== family) continue;
    const key = endpointKey(g.endpoint);
    if (!kept.has(key)) gone.set(key, g.endpoint);
  }
  return [...gone.values()];
}

/** The byte of a frontend's key that holds its protocol, and UDP's number there (layout.ts). */
const KEY_PROTOCOL = 18;
const UDP = 17;

/** Adds the endpoints of `groups`' UDP groups to `kept`, as goneFromMaps takes them. */
export function keepUdpEndpoints(groups: readonly RenderedGroup[], kept: Set<string>): void {
  for (const g of groups)
    if (g.frontends[0]?.protocol === "UDP") for (const b of g.backends) kept.add(endpointKey(b));
}

/**
 * The UDP endpoints the maps held when a full sync read them (what the run before this one, or
 * the write before a failure, left there) that no UDP group of the new state names (`kept`, by
 * keepUdpEndpoints). The maps do not say which Service a frontend belongs to, so an endpoint
 * still balanced to by any UDP frontend stays: a socket connected to it may still be right.
 */
export function goneFromMaps(read: Adopted, kept: ReadonlySet<string>): Backend[] {
  const gone = new Map<string, Backend>();
  for (const [key, value] of read.byFrontend) {
    if (key.charCodeAt(KEY_PROTOCOL) !== UDP) continue;
    const slots = read.slots.get(`${value.id}/${value.gen}`) ?? [];
    for (let index = 0; index < Math.min(value.count, slots.length); index++) {
      const slot = slots[index];
      if (slot === undefined) continue;
      const b = decodeBackend(slot);
      const k = endpointKey(b);
      if (!kept.has(k)) gone.set(k, b);
    }
  }
  return [...gone.values()];
}

/** The iterator's output: one line per socket it acted on, bpf_sock_destroy's result (0 or -errno). */
export function destroyResults(output: string): DestroyResult {
  let ok = 0;
  let failed = 0;
  for (const line of output.split("\n")) {
    if (line === "") continue;
    if (line === "0") ok++;
    else failed++;
  }
  return { destroyed: ok, failed };
}

/** Gone endpoints queued for runs of the iterator: one run at a time, never blocking a sync. */
export class UdpSocketDestroyer {
  readonly #runner: SocketDestroyRunner;
  readonly #log: Logger;
  readonly #pending = new Map<string, Backend>();
  #running: Promise<void> | undefined;

  constructor(runner: SocketDestroyRunner, log: Logger) {
    this.#runner = runner;
    this.#log = log;
    destroyed.inc(0);
    failures.inc(0);
  }

  /** Queues a run for the sockets connected to `endpoints` (already gone from the maps). */
  destroy(endpoints: readonly Backend[]): void {
    let dropped = 0;
    for (const e of endpoints) {
      const key = endpointKey(e);
      if (this.#pending.has(key)) continue;
      if (this.#pending.size >= MAX_PENDING) dropped++;
      else this.#pending.set(key, { ip: e.ip, port: e.port });
    }
    if (dropped > 0) {
      failures.inc(dropped);
      this.#log.warn({ dropped }, "too many gone UDP endpoints queued: their connected sockets are not cut");
    }
    this.#kick();
  }

  /** Resolves once every queued run has been made. */
  async idle(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  #kick(): void {
    if (this.#running !== undefined || this.#pending.size === 0) return;
    this.#running = this.#drain().finally(() => {
      this.#running = undefined;
      this.#kick();
    });
  }

  async #drain(): Promise<void> {
    while (this.#pending.size > 0) {
      const batch: Backend[] = [];
      for (const [key, e] of this.#pending) {
        if (batch.length === MAX_PER_RUN) break;
        batch.push(e);
        this.#pending.delete(key);
      }
      const started = performance.now();
      try {
        const r = await this.#runner.run(batch);
        if (r === undefined) continue;
        destroyed.inc(r.destroyed);
        if (r.failed > 0) failures.inc(r.failed);
        if (r.destroyed + r.failed > 0)
          this.#log.info(
            { endpoints: batch.length, ...r, ms: Math.round(performance.now() - started) },
            "destroyed UDP sockets connected to gone endpoints",
          );
      } catch (err) {
        failures.inc();
        this.#log.warn(
          { err: (err as Error).message, endpoints: batch.length },
          "the UDP socket iterator failed: sockets connected to gone endpoints keep them",
        );
      }
    }
  }
}
