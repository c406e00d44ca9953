// Connected UDP sockets to endpoints that left their Service. connect() translated the Service
// address once, so such a socket keeps sending to the endpoint it got; with to-nft the removed
// endpoint's conntrack entries go and the next datagram is balanced again. Here the node's UDP
// sockets connected to a gone endpoint are destroyed instead (bpf/udp-destroy.bpf.c, a UDP
// socket iterator calling bpf_sock_destroy): their next send fails, and a client that connects
// again gets a live endpoint. A socket is matched as a conntrack entry is: by the Service address
// it was sent to and the endpoint it went to. The connect programs record both per socket in
// kpng_rev (socket cookie, endpoint -> frontend; pinned, so a restarted kpng still reads what the
// run before recorded): kpng picks the cookies of the gone (frontend, endpoint) pairs from it and
// puts them in the iterator's map. An iterator walks the sockets of the network namespace it is
// read from: kpng reads it in its own (the node's) and, through nsenter, in each other namespace
// of the processes in the balanced cgroup tree (the pods), then empties the map again. Runs are
// queued and made in the background, one at a time, after the maps no longer name those pairs.

import { existsSync, statSync } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { createMapRef, objGet, RawMap } from "bpf";
import { execVia, type SmallSpawner } from "../../host/small-spawner.ts";
import { type GoneEndpoint, goneEndpoints } from "../../model/gone-endpoints.ts";
import type { IPFamily } from "../../model/kube.ts";
import type { LocalService } from "../../model/local.ts";
import type { Logger } from "../../observability/log.ts";
import { counter } from "../../observability/metrics.ts";
import {
  BACKEND_BYTES,
  type Backend,
  decodeBackend,
  decodeFrontend,
  listName,
  MAPS,
  writeBackend,
  writeFrontend,
} from "./layout.ts";
import { mapPinPath } from "./maps.ts";
import type { RenderedGroup } from "./render.ts";
import type { Adopted } from "./writer.ts";

/** The iterator's object, next to kpng.bpf.o (a kernel without bpf_sock_destroy refuses only it). */
export const UDP_DESTROY_OBJECT = "kpng-udp-destroy.bpf.o";
/** The iterator's map of the sockets to destroy: socket cookies (8 bytes, the host's order). */
export const UDP_GONE_MAP = "kpng_udp_gone";
/** A socket cookie's bytes: the iterator's map key, and the head of a kpng_rev key. */
export const COOKIE_BYTES = 8;
/** The map's size (bpf/udp-destroy.bpf.c): sockets per pass of the iterator. */
const MAX_SOCKETS_PER_PASS = 65_536;
/** Gone pairs per run. */
const MAX_PER_RUN = 4096;
/** Pairs waiting beyond this are dropped (counted): their sockets keep their endpoint. */
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
  "Runs of the UDP socket iterator that failed or timed out, sockets it could not destroy, and gone (frontend, endpoint) pairs dropped from a full queue.",
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

/**
 * A (frontend, endpoint) pair that no longer carries UDP traffic (model/gone-endpoints.ts): the
 * sockets connected through `address`:`port` (no address: a node port, any node address) to
 * `endpoint` go.
 */
export type GoneFlow = Pick<GoneEndpoint, "address" | "port" | "endpoint">;

/** One run over the node's UDP sockets. */
export interface SocketDestroyRunner {
  /**
   * Destroys the sockets connected through any of `flows` (at most MAX_PER_RUN); undefined when
   * the iterator is not in place (a kernel without bpf_sock_destroy). Throws when the run fails.
   */
  run(flows: readonly GoneFlow[]): Promise<DestroyResult | undefined>;
}

/** The kernel's: the pinned map and iterator, read in the node's namespace and in each pod's. */
export class PinnedUdpDestroyer implements SocketDestroyRunner {
  readonly #pins: ReturnType<typeof udpDestroyPins>;
  readonly #bpfRoot: string;
  readonly #cgroupRoot: string;
  readonly #log: Logger;
  /** Starts the iterator in each pod's namespace, one process per pod (see BpftoolLoader). */
  readonly #spawner: SmallSpawner | undefined;

  constructor(bpfRoot: string, cgroupRoot: string, log: Logger, spawner?: SmallSpawner) {
    this.#pins = udpDestroyPins(bpfRoot);
    this.#bpfRoot = bpfRoot;
    this.#cgroupRoot = cgroupRoot;
    this.#log = log;
    this.#spawner = spawner;
  }

  async run(flows: readonly GoneFlow[]): Promise<DestroyResult | undefined> {
    if (!existsSync(this.#pins.iterator) || !existsSync(this.#pins.map)) return undefined;
    const reverse = new RawMap(
      createMapRef(objGet(mapPinPath(this.#bpfRoot, "reverse")), { transfer: true }),
    );
    const cookies = connectedThrough(reverse.getBatch(REVERSE_BATCH), flows);
    let result: DestroyResult = { destroyed: 0, failed: 0 };
    if (cookies.length === 0) return result;
    const map = new RawMap(createMapRef(objGet(this.#pins.map), { transfer: true }));
    const one = Buffer.from([1]);
    for (let at = 0; at < cookies.length; at += MAX_SOCKETS_PER_PASS) {
      const pass = cookies.slice(at, at + MAX_SOCKETS_PER_PASS);
      try {
        // Runs never overlap, so whatever the map holds now was left by one that did not finish
        // (kpng stopped in between): those sockets are not this run's to cut.
        map.clear();
        for (const cookie of pass) map.set(cookie, one);
        const more = await this.#pass();
        result = { destroyed: result.destroyed + more.destroyed, failed: result.failed + more.failed };
      } finally {
        for (const cookie of pass) {
          try {
            map.delete(cookie);
          } catch {
            // not written: the run failed before it (the error is already on its way)
          }
        }
      }
    }
    return result;
  }

  /** One pass of the iterator: in the node's namespace, then in each pod's. */
  async #pass(): Promise<DestroyResult> {
    const own = await readFile(this.#pins.iterator, {
      encoding: "utf8",
      signal: AbortSignal.timeout(RUN_TIMEOUT_MS),
    });
    let result = destroyResults(own);
    let namespaceFailures = 0;
    for (const pid of await this.#podNamespaces()) {
      const r = await execVia(
        this.#spawner,
        ["nsenter", `--net=/proc/${pid}/ns/net`, "--", "cat", this.#pins.iterator],
        { timeoutMs: RUN_TIMEOUT_MS },
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

/** kpng_rev's layout (bpf/kpng.bpf.c rev_key, rev_val): where the endpoint and the frontend are. */
const REV_ENDPOINT = COOKIE_BYTES;
/** An address (16 bytes) and a port (2): the first 18 bytes of a backend value or a frontend key. */
const ADDRESS_PORT = 18;
const REVERSE_BATCH = 4096;

const flowKey = (f: GoneFlow) => `${f.address ?? "*"} ${f.port} ${f.endpoint.ip} ${f.endpoint.port}`;

/**
 * The cookies of the sockets connected through one of `flows`, from kpng_rev's entries (socket
 * cookie, endpoint -> frontend). A socket connected to the endpoint through another frontend, or
 * straight to it (no entry), is not one of them.
 */
export function connectedThrough(
  reverse: Iterable<Iterable<[Buffer, Buffer]>>,
  flows: readonly GoneFlow[],
): Buffer[] {
  // By the endpoint's bytes: the frontends (their bytes, or a port alone for a node port) it left.
  const wanted = new Map<string, { any: Set<number>; exact: Set<string> }>();
  const be = Buffer.alloc(BACKEND_BYTES);
  const fe = Buffer.alloc(MAPS.services.key);
  for (const f of flows) {
    writeBackend(be, 0, f.endpoint);
    const key = be.toString("latin1", 0, ADDRESS_PORT);
    const w = wanted.get(key) ?? { any: new Set(), exact: new Set() };
    if (f.address === undefined) w.any.add(f.port);
    else {
      writeFrontend(fe, 0, { ip: f.address, port: f.port, protocol: "UDP" });
      w.exact.add(fe.toString("latin1", 0, ADDRESS_PORT));
    }
    wanted.set(key, w);
  }
  const out: Buffer[] = [];
  for (const batch of reverse) {
    for (const [k, v] of batch) {
      const w = wanted.get(k.toString("latin1", REV_ENDPOINT, REV_ENDPOINT + ADDRESS_PORT));
      if (w === undefined) continue;
      if (w.exact.has(v.toString("latin1", 0, ADDRESS_PORT)) || w.any.has(v.readUInt16BE(16)))
        out.push(Buffer.from(k.subarray(0, COOKIE_BYTES)));
    }
  }
  return out;
}

/** The UDP (frontend, endpoint) pairs of `family` that left the Service (model/gone-endpoints.ts). */
export function goneUdpFlows(
  prev: LocalService,
  next: LocalService | undefined,
  family: IPFamily,
): GoneFlow[] {
  return goneEndpoints(prev, next).filter((g) => g.protocol === "UDP" && g.family === family);
}

/** The byte of a frontend's key that holds its protocol, and UDP's number there (layout.ts). */
const KEY_PROTOCOL = 18;
const UDP = 17;

const pairKey = (frontend: string, b: Backend) => `${frontend} ${b.ip} ${b.port}`;

/** Adds the (frontend, endpoint) pairs of `groups`' UDP groups to `kept`, as goneFromMaps takes them. */
export function keepUdpFlows(groups: readonly RenderedGroup[], kept: Set<string>): void {
  for (const g of groups) {
    if (g.frontends[0]?.protocol !== "UDP") continue;
    for (const f of g.frontends) for (const b of g.backends) kept.add(pairKey(`${f.ip} ${f.port}`, b));
  }
}

/**
 * The UDP (frontend, endpoint) pairs the maps held when a full sync read them (what the run before
 * this one, or the write before a failure, left there) that the new state no longer has (`kept`,
 * by keepUdpFlows).
 */
export function goneFromMaps(read: Adopted, kept: ReadonlySet<string>): GoneFlow[] {
  const gone: GoneFlow[] = [];
  for (const [key, value] of read.byFrontend) {
    if (key.charCodeAt(KEY_PROTOCOL) !== UDP) continue;
    const f = decodeFrontend(Buffer.from(key, "latin1"));
    const list = read.lists.get(listName(value)) ?? [];
    for (let index = 0; index < Math.min(value.count, list.length); index++) {
      const backend = list[index];
      if (backend === undefined) continue;
      const b = decodeBackend(backend);
      if (!kept.has(pairKey(`${f.ip} ${f.port}`, b))) gone.push({ address: f.ip, port: f.port, endpoint: b });
    }
  }
  return gone;
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

/** Gone pairs queued for runs of the iterator: one run at a time, never blocking a sync. */
export class UdpSocketDestroyer {
  readonly #runner: SocketDestroyRunner;
  readonly #log: Logger;
  readonly #pending = new Map<string, GoneFlow>();
  #running: Promise<void> | undefined;

  constructor(runner: SocketDestroyRunner, log: Logger) {
    this.#runner = runner;
    this.#log = log;
    destroyed.inc(0);
    failures.inc(0);
  }

  /** Queues a run for the sockets connected through `flows` (already gone from the maps). */
  destroy(flows: readonly GoneFlow[]): void {
    let dropped = 0;
    for (const f of flows) {
      const key = flowKey(f);
      if (this.#pending.has(key)) continue;
      if (this.#pending.size >= MAX_PENDING) dropped++;
      else this.#pending.set(key, f);
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
      const batch: GoneFlow[] = [];
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
            { pairs: batch.length, ...r, ms: Math.round(performance.now() - started) },
            "destroyed UDP sockets connected to gone endpoints",
          );
      } catch (err) {
        failures.inc();
        this.#log.warn(
          { err: (err as Error).message, pairs: batch.length },
          "the UDP socket iterator failed: sockets connected to gone endpoints keep them",
        );
      }
    }
  }
}
