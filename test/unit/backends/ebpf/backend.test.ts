// The eBPF sync loop with a fake loader and fake maps: full sync at start (the loader first),
// only changed Services afterwards, a failed write retried as a full sync, a repair reloading
// what was removed, and a full map reported; each IP family synced, timed and repaired on its own.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { BackendFamily } from "../../../../src/backend-core/sync-loop.ts";
import { SyncLoop } from "../../../../src/backend-core/sync-loop.ts";
import { EbpfBackend } from "../../../../src/backends/ebpf/backend.ts";
import { decodeFrontend, decodeServiceValue } from "../../../../src/backends/ebpf/layout.ts";
import { listFrontends } from "../../../../src/backends/ebpf/list.ts";
import { jointObservers, untilFirstOutcome } from "../../../../src/backends/ebpf/plugin.ts";
import { EbpfProbe } from "../../../../src/backends/ebpf/probe.ts";
import {
  ATTACH_AFTER_WRITE,
  CREATED_MAP,
  type ProgramLoader,
} from "../../../../src/backends/ebpf/programs.ts";
import type { SyncObserver, SyncOutcome } from "../../../../src/node/sync-observer.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { registry } from "../../../../src/observability/metrics.ts";
import { FakeBpfMaps } from "../../../support/fake-bpf-maps.ts";
import { settle } from "../../../support/settle.ts";
import { ep, manyServices, port, service, state } from "../nft/fixtures.ts";

class FakeLoader implements ProgramLoader {
  ensured = 0;
  checked = 0;
  missing: string[] = [];
  /** The next ensure() creates the maps anew (their pins were removed), and leaves the attach. */
  recreate = false;
  /** The next ensure() fails with this. */
  failNext: Error | undefined;
  /** The next attach() fails with this. */
  failAttach: Error | undefined;
  /** The frontends the maps held at each attach() that attached. */
  readonly attaches: number[] = [];
  #attachPending = false;
  readonly #maps: FakeBpfMaps | undefined;
  constructor(maps?: FakeBpfMaps) {
    this.#maps = maps;
  }
  async ensure(): Promise<string[]> {
    this.ensured++;
    const failure = this.failNext;
    this.failNext = undefined;
    if (failure !== undefined) throw failure;
    const done = this.missing.map((m) => `restored ${m}`);
    if (this.recreate) done.push(`${CREATED_MAP} kpng_svc`, ATTACH_AFTER_WRITE);
    this.#attachPending = this.recreate;
    this.missing = [];
    this.recreate = false;
    return done;
  }
  async attach(): Promise<string[]> {
    const failure = this.failAttach;
    this.failAttach = undefined;
    if (failure !== undefined) throw failure;
    if (!this.#attachPending) return [];
    this.#attachPending = false;
    this.attaches.push(this.#maps === undefined ? 0 : listFrontends(this.#maps).length);
    return ["attached connect4"];
  }
  async check(): Promise<string[]> {
    this.checked++;
    return this.missing;
  }
  async remove(): Promise<string[]> {
    return [];
  }
}

function setup(maps = new FakeBpfMaps()) {
  const loader = new FakeLoader(maps);
  const backend = new EbpfBackend({
    loader,
    openMaps: () => maps,
    render: { nodePortIPs: { IPv4: [], IPv6: [] } },
    log: silentLogger,
  });
  return { loader, maps, backend };
}

describe("eBPF backend sync loop", () => {
  test("the first sync loads the programs, then only changed Services are written", async () => {
    const { loader, maps, backend } = setup();
    const first = await backend.sync(state(manyServices(50), 1));
    assert.equal(first.full, true);
    assert.equal(loader.ensured, 1); // the families' first full syncs share one look
    assert.equal(listFrontends(maps).length, 50);
    const services = manyServices(50);
    services[3] = {
      ...services[3]!,
      ports: [port({ internalEndpoints: [ep("10.9.9.9")] })],
    };
    const next = await backend.sync(state(services, 2));
    assert.equal(next.full, false);
    assert.equal(next.services, 100); // no change log in this state: each family compares every key…
    assert.equal(next.backendsWritten, 1); // …but only the changed one is written
    assert.equal(loader.ensured, 1);
  });

  test("prepare() loads the programs before the first state, and the first sync does not wait to load again", async () => {
    const { loader, maps, backend } = setup();
    backend.prepare();
    backend.prepare();
    assert.equal(loader.ensured, 1);
    await settle();
    const first = await backend.sync(state(manyServices(5), 1));
    assert.equal(first.full, true);
    assert.equal(loader.ensured, 1);
    assert.equal(listFrontends(maps).length, 5);
  });

  test("a load that failed in prepare() fails the first sync, and the next sync loads again", async () => {
    const { loader, maps, backend } = setup();
    loader.failNext = new Error("bpftool prog loadall: Permission denied");
    backend.prepare();
    await settle();
    await assert.rejects(backend.sync(state([service()], 1)), /Permission denied/);
    assert.match(backend.problem ?? "", /Permission denied/);
    const again = await backend.sync(state([service()], 1));
    assert.equal(again.full, true);
    assert.equal(loader.ensured, 2);
    assert.equal(listFrontends(maps).length, 1);
    assert.equal(backend.problem, undefined);
  });

  test("a failed write is retried as a full sync, which converges the maps", async () => {
    const { loader, maps, backend } = setup();
    await backend.sync(state([service()], 1));
    maps.failNextWrites = 1;
    const changed = service({
      ports: [port({ internalEndpoints: [ep("198.51.100.4")] })],
    });
    await assert.rejects(backend.sync(state([changed], 2)));
    assert.match(backend.problem ?? "", /Input\/output error/);
    const again = await backend.sync(state([changed], 2));
    assert.equal(again.full, true);
    assert.equal(loader.ensured, 2); // the failed family looks again
    assert.deepEqual(listFrontends(maps)[0]?.backends, ["198.51.100.4:8080"]);
    assert.equal(backend.problem, undefined);
  });

  test("a full map is counted and reported until there is room", async () => {
    const { maps, backend } = setup(new FakeBpfMaps({ backends: 10 }));
    await assert.rejects(backend.sync(state(manyServices(20), 1)), /map full/);
    const metric = (await registry.getSingleMetric("kpng_ebpf_map_full_total")?.get())?.values ?? [];
    assert.ok(metric.some((v) => v.labels.map === "backends" && v.value >= 1));
    maps.capacity.backends = 100;
    await backend.sync(state(manyServices(20), 1));
    assert.equal(listFrontends(maps).length, 20);
  });

  test("forget (a repair, a failure): the next apply reloads what is missing and rewrites the maps", async () => {
    const { loader, maps, backend } = setup();
    const family = backend.asFamilies()[0]!;
    assert.equal((await family.apply(state([service()], 1), false)).full, true);
    // Someone removed the pins: the maps are gone (new, empty ones) and the probe fails.
    maps.maps.services.clear();
    maps.maps.backends.clear();
    loader.missing = ["map kpng_svc not pinned"];
    family.forget();
    assert.equal((await family.apply(state([service()], 1), false)).full, true);
    assert.equal(loader.ensured, 2);
    assert.deepEqual(loader.missing, []);
    assert.equal(maps.maps.services.size, 1);
    // Nothing changed and nothing forgotten: the periodic resync writes nothing.
    maps.calls.length = 0;
    assert.equal((await family.apply(state([service()], 1), true)).full, false);
    assert.deepEqual(maps.calls, []);
  });
});

describe("each IP family on its own", () => {
  const dualStack = () =>
    service({
      clusterIPs: ["203.0.113.10", "2001:db8::10"],
      ports: [
        port({
          endpointFamilies: ["IPv4", "IPv6"],
          internalEndpoints: [ep("198.51.100.2"), ep("2001:db8:1::2")],
        }),
      ],
    });
  const addresses = (maps: FakeBpfMaps) => listFrontends(maps).map((f) => `${f.address} ${f.backends}`);

  test("each family writes its own frontends and lists, with ids that never meet", async () => {
    const { maps, backend } = setup();
    const [v4, v6] = backend.asFamilies() as [BackendFamily, BackendFamily];
    assert.deepEqual(
      [v4.family, v4.ipFamilies, v6.family, v6.ipFamilies],
      ["IPv4", ["IPv4"], "IPv6", ["IPv6"]],
    );
    await v4.apply(state([dualStack()], 1), false);
    assert.deepEqual(addresses(maps), ["203.0.113.10 198.51.100.2:8080"]);
    await v6.apply(state([dualStack()], 1), false);
    assert.deepEqual(addresses(maps), [
      "2001:db8::10 [2001:db8:1::2]:8080",
      "203.0.113.10 198.51.100.2:8080",
    ]);
    const ids = new Map(
      [...maps.entries("services")].map(([k, v]) => [decodeFrontend(k).ip, decodeServiceValue(v).id]),
    );
    assert.ok(ids.get("203.0.113.10")! < 2 ** 31);
    assert.ok(ids.get("2001:db8::10")! >= 2 ** 31);
  });

  test("one family's full sync adopts its own entries and leaves the other family's alone", async () => {
    const { maps, backend } = setup();
    const [v4, v6] = backend.asFamilies() as [BackendFamily, BackendFamily];
    await v4.apply(state([dualStack()], 1), false);
    await v6.apply(state([dualStack()], 1), false);
    const before = addresses(maps);
    v6.forget();
    maps.calls.length = 0;
    assert.equal((await v6.apply(state([dualStack()], 1), false)).full, true);
    // Read and found right: nothing written, nothing of IPv4's deleted as stale.
    assert.deepEqual(maps.calls, []);
    assert.deepEqual(addresses(maps), before);
    // An IPv4 endpoint change writes the IPv4 list only.
    const moved = service({
      ...dualStack(),
      ports: [
        port({
          endpointFamilies: ["IPv4", "IPv6"],
          internalEndpoints: [ep("198.51.100.9"), ep("2001:db8:1::2")],
        }),
      ],
    });
    const written = await backend.syncFamily("IPv4", state([moved], 2));
    const untouched = await backend.syncFamily("IPv6", state([moved], 2));
    assert.equal(written.backendsWritten, 1);
    assert.equal(untouched.backendsWritten + untouched.frontendsWritten, 0);
    assert.deepEqual(addresses(maps), [
      "2001:db8::10 [2001:db8:1::2]:8080",
      "203.0.113.10 198.51.100.9:8080",
    ]);
  });

  test("a start reads the maps once for both families, not back what the first one wrote", async () => {
    const reads: string[] = [];
    const maps = new (class extends FakeBpfMaps {
      override entries(map: "services" | "backends") {
        reads.push(map);
        return super.entries(map);
      }
    })();
    const { backend } = setup(maps);
    await backend.sync(state([dualStack()], 1));
    assert.deepEqual(reads, ["services", "backends"]);
    // A repair of one family reads again: the other family's share of the first read is gone.
    const [v4] = backend.asFamilies() as [BackendFamily];
    v4.forget();
    await v4.apply(state([dualStack()], 1), false);
    assert.deepEqual(reads, ["services", "backends", "services", "backends"]);
  });

  test("the shared loop times each family under its own ip_family, never an empty one", async () => {
    const { backend } = setup();
    const loop = new SyncLoop({ backend: "ebpf", families: backend.asFamilies(), log: silentLogger });
    await loop.sync(state([dualStack()], 1));
    const values =
      (await registry.getSingleMetric("kubeproxy_sync_proxy_rules_duration_seconds")?.get())?.values ?? [];
    const counts = values.filter(
      (v) => v.labels.backend === "ebpf" && (v as { metricName?: string }).metricName?.endsWith("_count"),
    );
    assert.deepEqual(counts.map((v) => [v.labels.ip_family, v.value]).sort(), [
      ["IPv4", 1],
      ["IPv6", 1],
    ]);
  });

  test("maps re-created while one family was repaired: the probe finds the other family's entries gone", async () => {
    const { loader, maps, backend } = setup();
    const [v4, v6] = backend.asFamilies() as [BackendFamily, BackendFamily];
    const probe = new EbpfProbe(loader, silentLogger, { stale: (f) => backend.stale(f) });
    await v4.apply(state([dualStack()], 1), false);
    await v6.apply(state([dualStack()], 1), false);
    assert.deepEqual([await probe.intact("IPv4"), await probe.intact("IPv6")], [true, true]);
    // The pins went and IPv4's repair put new, empty maps in place before IPv6 was looked at.
    maps.maps.services.clear();
    maps.maps.backends.clear();
    loader.recreate = true;
    v4.forget();
    await v4.apply(state([dualStack()], 1), false);
    assert.deepEqual([await probe.intact("IPv4"), await probe.intact("IPv6")], [true, false]);
    v6.forget();
    await v6.apply(state([dualStack()], 1), false);
    assert.equal(await probe.intact("IPv6"), true);
    assert.equal(listFrontends(maps).length, 2);
  });

  test("maps created anew (a restart with other sizes or another layout): the programs attach once both families have written them", async () => {
    const { loader, backend } = setup();
    const [v4, v6] = backend.asFamilies() as [BackendFamily, BackendFamily];
    loader.recreate = true;
    backend.prepare();
    await settle();
    await v4.apply(state([dualStack()], 1), false);
    assert.deepEqual(loader.attaches, [], "IPv6's Services would resolve nowhere");
    await v6.apply(state([dualStack()], 1), false);
    assert.deepEqual(loader.attaches, [2]);
    // A repair that keeps the maps attaches nothing later.
    v4.forget();
    await v4.apply(state([dualStack()], 1), false);
    assert.deepEqual(loader.attaches, [2]);
  });

  test("an attach that fails fails the sync, and the next full sync's load puts the programs in place", async () => {
    const { loader, backend } = setup();
    loader.recreate = true;
    loader.failAttach = new Error("bpftool cgroup attach: Operation not permitted");
    await assert.rejects(backend.sync(state([dualStack()], 1)), /Operation not permitted/);
    assert.match(backend.problem ?? "", /Operation not permitted/);
    // The loader attaches in ensure() when it creates nothing (compared by id, see programs.ts).
    const again = await backend.sync(state([dualStack()], 1));
    assert.equal(again.full, true);
    assert.equal(loader.ensured, 2);
    assert.equal(backend.problem, undefined);
  });

  test("the families of one probe round share one look at the kernel", async () => {
    const loader = new FakeLoader();
    let now = 0;
    const probe = new EbpfProbe(loader, silentLogger, { now: () => now });
    await probe.intact("IPv4");
    await probe.intact("IPv6");
    assert.equal(loader.checked, 1);
    // The next round: IPv4 has had this answer, so it looks again; IPv6 then shares that one.
    now += 1000;
    await probe.intact("IPv4");
    now += 100;
    await probe.intact("IPv6");
    assert.equal(loader.checked, 2);
    // An answer too old for a family that has not seen it: a new look.
    now += 1000;
    loader.missing = ["connect4 not attached"];
    assert.equal(await probe.intact("IPv6"), false);
    assert.equal(loader.checked, 3);
  });
});

describe("joint observers (eBPF and nft on one node services)", () => {
  test("a state counts as synced once both backends have synced it", async () => {
    const seen: number[] = [];
    const target: SyncObserver = {
      queued: () => {},
      synced: async (o) => {
        seen.push(o.state.revision);
      },
      failed: () => {},
    };
    const [a, b] = jointObservers(target, 2) as [SyncObserver, SyncObserver];
    const at = (revision: number): SyncOutcome => ({
      state: state([], revision),
      full: false,
      durationMs: 1,
    });
    await a.synced(at(1));
    assert.deepEqual(seen, []);
    await b.synced(at(1));
    await b.synced(at(2));
    assert.deepEqual(seen, [1]);
    await a.synced(at(2));
    assert.deepEqual(seen, [1, 2]);
  });
});

describe("the companion waits for the maps' first sync", () => {
  const settled = async (p: Promise<void>) => {
    let done = false;
    void p.then(() => {
      done = true;
    });
    await settle(1);
    return done;
  };
  const target = (seen: string[]): SyncObserver => ({
    queued: () => seen.push("queued"),
    synced: async () => {
      seen.push("synced");
    },
    failed: () => seen.push("failed"),
  });

  test("not before the maps are synced; then at once, and the node services still hear of it", async () => {
    const seen: string[] = [];
    const { observer, first } = untilFirstOutcome(target(seen), new AbortController().signal);
    observer.queued(state([], 1));
    assert.equal(await settled(first), false);
    await observer.synced({ state: state([], 1), full: true, durationMs: 1 });
    assert.equal(await settled(first), true);
    assert.deepEqual(seen, ["queued", "synced"]);
  });

  test("a failed first sync (a full map) starts the companion too", async () => {
    const { observer, first } = untilFirstOutcome(target([]), new AbortController().signal);
    observer.failed();
    assert.equal(await settled(first), true);
  });

  test("a stop before the first sync does not leave the companion waiting forever", async () => {
    const stop = new AbortController();
    const { first } = untilFirstOutcome(target([]), stop.signal);
    assert.equal(await settled(first), false);
    stop.abort();
    assert.equal(await settled(first), true);
  });
});
