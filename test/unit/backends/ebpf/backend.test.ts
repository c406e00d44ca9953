// The eBPF sync loop with a fake loader and fake maps: full sync at start (the loader first),
// only changed Services afterwards, a failed write retried as a full sync, a repair reloading
// what was removed, and a full map reported.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EbpfBackend } from "../../../../src/backends/ebpf/backend.ts";
import { listFrontends } from "../../../../src/backends/ebpf/list.ts";
import { jointObservers, untilFirstOutcome } from "../../../../src/backends/ebpf/plugin.ts";
import type { ProgramLoader } from "../../../../src/backends/ebpf/programs.ts";
import type { SyncObserver, SyncOutcome } from "../../../../src/node/sync-observer.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { registry } from "../../../../src/observability/metrics.ts";
import { FakeBpfMaps } from "../../../support/fake-bpf-maps.ts";
import { settle } from "../../../support/settle.ts";
import { ep, manyServices, port, service, state } from "../nft/fixtures.ts";

class FakeLoader implements ProgramLoader {
  ensured = 0;
  missing: string[] = [];
  async ensure(): Promise<string[]> {
    this.ensured++;
    const done = this.missing.map((m) => `restored ${m}`);
    this.missing = [];
    return done;
  }
  async check(): Promise<string[]> {
    return this.missing;
  }
  async remove(): Promise<string[]> {
    return [];
  }
}

function setup(maps = new FakeBpfMaps()) {
  const loader = new FakeLoader();
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
    assert.equal(loader.ensured, 1);
    assert.equal(listFrontends(maps).length, 50);
    const services = manyServices(50);
    services[3] = {
      ...services[3]!,
      ports: [port({ internalEndpoints: [ep("10.9.9.9")] })],
    };
    const next = await backend.sync(state(services, 2));
    assert.equal(next.full, false);
    assert.equal(next.services, 50); // no change log in this state: every key is compared…
    assert.equal(next.backendsWritten, 1); // …but only the changed one is written
    assert.equal(loader.ensured, 1);
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
    assert.equal(loader.ensured, 2);
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
    const family = backend.asFamily();
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
