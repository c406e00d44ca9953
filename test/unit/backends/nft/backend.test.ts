import assert from "node:assert/strict";
import { test } from "node:test";
import { RESET_AFTER_FAILURES } from "../../../../src/backend-core/sync-loop.ts";
import { NftBackend } from "../../../../src/backends/nft/backend.ts";
import { chainName } from "../../../../src/backends/nft/names.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { registry } from "../../../../src/observability/metrics.ts";
import { eventually } from "../../../support/eventually.ts";
import { FakeNft } from "../../../support/fake-nft.ts";
import { ep, manyServices, port, sent, service, state, V4, V6 } from "./fixtures.ts";

function setup(over: { now?: () => number; max?: number; nft?: FakeNft } = {}) {
  const nft = over.nft ?? new FakeNft();
  const backend = new NftBackend({
    runner: nft,
    tables: [V4, V6],
    log: silentLogger,
    now: over.now,
    maxStatementsPerTransaction: over.max,
  });
  return { nft, backend };
}

function statements(text: string): string[] {
  return text.split("\n").filter((l) => l.trim() !== "");
}

const STICKY = chainName.internal("default/web/tcp/80");

/** A feed the test pushes states into by hand. */
class ManualFeed {
  listener: ((s: ReturnType<typeof state>) => void) | undefined;
  subscribe(l: (s: ReturnType<typeof state>) => void) {
    this.listener = l;
    return () => {
      this.listener = undefined;
    };
  }
  push(s: ReturnType<typeof state>): void {
    this.listener?.(s);
  }
}

test("first sync builds both tables; references are all valid (checked by the fake)", async () => {
  const { nft, backend } = setup();
  await backend.sync(state([service()]));
  assert.ok(nft.hasTable("ip", "kpng"));
  assert.ok(nft.hasTable("ip6", "kpng"));
  assert.equal(nft.elements("ip", "kpng", "service-ips")?.get("203.0.113.10 . tcp . 80"), "goto pick-tcp-2");
  assert.equal(
    nft.elements("ip", "kpng", "endpoints-tcp")?.get("203.0.113.10 . 80 . 1"),
    "198.51.100.3 . 8080",
  );
  assert.deepEqual(nft.elements("ip6", "kpng", "service-ips")?.size, 0);
});

test("an unchanged state (same objects) writes nothing", async () => {
  const { nft, backend } = setup();
  const s = state([service()]);
  await backend.sync(s);
  const before = nft.transactions.length;
  const report = await sent(nft, backend, { ...s, revision: 2 });
  assert.equal(report.texts.length, 0);
  assert.equal(nft.transactions.length, before);
});

test("one endpoint change among many services replaces one map element and adds one hairpin element", async () => {
  let now = 1_000_000;
  const { nft, backend } = setup({ now: () => now });
  const services = manyServices(500);
  // Service 7's endpoints run on this node: only those have hairpin elements.
  const here = (ip: string) => ep(ip, 8080, { local: true });
  services[7] = {
    ...services[7]!,
    ports: [port({ internalEndpoints: [here("10.1.0.7"), here("10.2.0.7")] })],
  };
  await backend.sync(state(services));
  assert.deepEqual([...(nft.elements("ip", "kpng", "hairpin-endpoints")?.keys() ?? [])].sort(), [
    "10.1.0.7 . 10.1.0.7",
    "10.2.0.7 . 10.2.0.7",
  ]);
  const changed = services.slice();
  const old = changed[7]!;
  changed[7] = {
    ...old,
    ports: [port({ internalEndpoints: [here("10.1.0.7"), here("10.3.0.7")] })],
  };
  const report = await sent(nft, backend, state(changed, 2));
  assert.equal(report.texts.length, 1);
  // No chain is written: the kernel commits map elements without re-validating chains.
  assert.deepEqual(statements(report.texts[0]!).sort(), [
    "add element ip kpng endpoints-tcp { 10.96.0.7 . 80 . 1 : 10.3.0.7 . 8080 }",
    "add element ip kpng hairpin-endpoints { 10.3.0.7 . 10.3.0.7 }",
    "delete element ip kpng endpoints-tcp { 10.96.0.7 . 80 . 1 }",
  ]);
  // The unused hairpin element goes later, with the stale objects, off the change's path.
  now += 1500;
  const later = await sent(nft, backend, state(changed, 2));
  assert.deepEqual(statements(later.texts[0] ?? ""), [
    "delete element ip kpng hairpin-endpoints { 10.2.0.7 . 10.2.0.7 }",
  ]);
  assert.equal(nft.elements("ip", "kpng", "hairpin-endpoints")?.has("10.2.0.7 . 10.2.0.7"), false);
});

test("incremental syncs end in the same ruleset as a fresh full sync", async () => {
  const { nft, backend } = setup();
  const a = manyServices(50);
  await backend.sync(state(a));
  const b = a.slice(10).concat([service({ name: "new", sessionAffinitySeconds: 5 })]);
  b[3] = { ...b[3]!, ports: [port({ internalEndpoints: [] })] };
  await backend.sync(state(b, 2));
  const fresh = setup();
  await fresh.backend.sync(state(b, 2));
  // Removed services leave flushed chains until they are deleted: compare after the deletion.
  let now = Date.now() + 5000;
  const later = setup({ nft, now: () => now });
  await later.backend.sync(state(b, 3)); // adopts the table and converges
  now += 1000;
  await later.backend.sync(state(b, 3));
  assert.equal(nft.dumpAnyGeneration(), fresh.nft.dumpAnyGeneration());
});

test("a removed service's chains are flushed now and deleted at least 1 s later", async () => {
  let now = 1_000_000;
  const { nft, backend } = setup({ now: () => now });
  await backend.sync(state([service({ sessionAffinitySeconds: 10 })]));
  const report = await sent(nft, backend, state([], 2));
  const text = report.texts.join("");
  assert.match(text, new RegExp(`flush chain ip kpng ${STICKY}`));
  assert.doesNotMatch(text, /delete chain/);
  assert.deepEqual(nft.rules("ip", "kpng", STICKY), []);
  now += 500;
  assert.equal((await sent(nft, backend, state([], 2))).texts.length, 0, "too early to delete");
  now += 600;
  const del = await sent(nft, backend, state([], 2));
  assert.match(del.texts.join(""), new RegExp(`delete chain ip kpng ${STICKY}`));
  assert.equal(nft.rules("ip", "kpng", STICKY), undefined);
  assert.equal(backend.hasStale, false);
});

test("a stale chain wanted again before deletion is refilled, not deleted", async () => {
  let now = 1_000_000;
  const { nft, backend } = setup({ now: () => now });
  const svc = service();
  await backend.sync(state([svc]));
  await backend.sync(state([], 2));
  assert.deepEqual(nft.rules("ip", "kpng", "pick-tcp-2"), []);
  await backend.sync(state([svc], 3));
  now += 5000;
  await backend.sync(state([svc], 3));
  assert.equal(nft.rules("ip", "kpng", "pick-tcp-2")?.length, 2);
});

test("a pick chain lives as long as one service uses it, even when its users change in one sync", async () => {
  let now = 1_000_000;
  const { nft, backend } = setup({ now: () => now });
  const three = [ep("198.51.100.2"), ep("198.51.100.3"), ep("198.51.100.4")];
  const a = service({ name: "a" });
  const b = service({ name: "b", clusterIPs: ["203.0.113.11"] });
  await backend.sync(state([a, b]));
  // a leaves pick-2 for pick-3 and b leaves pick-2 in the same sync, c starts using it.
  const a3 = { ...a, ports: [port({ internalEndpoints: three })] };
  const c = service({ name: "c", clusterIPs: ["203.0.113.12"] });
  const report = await sent(nft, backend, state([a3, c], 2));
  assert.doesNotMatch(report.texts.join(""), /flush chain ip kpng pick-tcp-2/);
  assert.equal(nft.elements("ip", "kpng", "service-ips")?.get("203.0.113.10 . tcp . 80"), "goto pick-tcp-3");
  assert.equal(
    nft.elements("ip", "kpng", "endpoints-tcp")?.get("203.0.113.10 . 80 . 2"),
    "198.51.100.4 . 8080",
  );
  // The last user leaves: flushed now, deleted later.
  await backend.sync(state([a3], 3));
  assert.deepEqual(nft.rules("ip", "kpng", "pick-tcp-2"), []);
  now += 1500;
  await backend.sync(state([a3], 3));
  assert.equal(nft.rules("ip", "kpng", "pick-tcp-2"), undefined);
  assert.equal(nft.rules("ip", "kpng", "pick-tcp-3")?.length, 2);
});

test("fewer endpoints: the dispatch element moves to the smaller pick chain before indexes go", async () => {
  // Transactions of at most two statements, so the move and the removal are committed apart.
  const { nft, backend } = setup({ max: 2 });
  const three = [ep("198.51.100.2"), ep("198.51.100.3"), ep("198.51.100.4")];
  await backend.sync(state([service({ ports: [port({ internalEndpoints: three })] })]));
  const report = await sent(nft, backend, state([service()], 2));
  const moved = report.texts.findIndex((t) =>
    t.includes("service-ips { 203.0.113.10 . tcp . 80 : goto pick-tcp-2 }"),
  );
  const removed = report.texts.findIndex((t) => t.includes("endpoints-tcp { 203.0.113.10 . 80 . 2 }"));
  assert.ok(moved >= 0 && removed > moved, report.texts.join("---\n"));
});

test("a failed transaction is retried as a full resync that converges", async () => {
  let now = 1_000_000;
  const { nft, backend } = setup({ now: () => now });
  await backend.sync(state([service()]));
  nft.failNext();
  const next = state([service({ ports: [port({ internalEndpoints: [ep("198.51.100.9")] })] })], 2);
  await assert.rejects(backend.sync(next));
  assert.equal(backend.needsFullSync("ip"), true);
  await backend.sync(next);
  now += 1500; // then the stale objects go
  await backend.sync(next);
  const fresh = setup();
  await fresh.backend.sync(next);
  assert.equal(nft.dumpAnyGeneration(), fresh.nft.dumpAnyGeneration());
});

test("a big first sync is split into bounded transactions, each valid on its own", async () => {
  const { nft, backend } = setup({ max: 300 });
  const report = await sent(nft, backend, state(manyServices(400)));
  assert.ok(report.texts.length > 5, `got ${report.texts.length}`);
  // Each element in a merged `{ a, b }` statement counts as one statement.
  const size = (t: string) =>
    statements(t).reduce((n, l) => n + (l.includes(" element ") ? l.split(",").length : 1), 0);
  for (const t of report.texts.slice(1)) assert.ok(size(t) <= 300, `transaction of ${size(t)} statements`);
  const fresh = setup({ max: 1_000_000 });
  const one = await sent(fresh.nft, fresh.backend, state(manyServices(400)));
  assert.equal(one.texts.length, 2, "one per family");
  assert.equal(nft.dump(), fresh.nft.dump());
  // Chains come before the map elements that point to them.
  const firstElements = report.texts.findIndex((t) => t.includes("add element ip kpng service-ips"));
  const lastChain = report.texts.findLastIndex((t) => t.includes("add chain ip kpng pick-"));
  assert.ok(lastChain <= firstElements);
});

/** A table an older kpng left: the dispatch map under its name with another type, serving. */
async function olderTable(nft: FakeNft): Promise<void> {
  await nft.run(
    "add table ip kpng\nadd map ip kpng service-ips { type ipv4_addr : verdict; }\n" +
      "add element ip kpng service-ips { 203.0.113.10 : accept }\n",
  );
}

/** Syncs until the loop has reset the table (3 refusals, then the rewrite); the rewrite's texts. */
async function syncThroughReset(nft: FakeNft, backend: NftBackend, s: ReturnType<typeof state>) {
  for (let i = 0; i < RESET_AFTER_FAILURES; i++)
    await assert.rejects(backend.sync(s), /File exists: map service-ips is declared otherwise/);
  const before = nft.transactions.length;
  await backend.sync(s);
  return nft.transactions.slice(before);
}

test("after repeated refusals the table is replaced in one transaction: the old one serves until the new one is whole", async () => {
  const { nft, backend } = setup();
  await olderTable(nft);
  const texts = await syncThroughReset(nft, backend, state([service()]));
  const ip = texts.filter((t) => t.includes(" ip kpng"));
  assert.equal(ip.length, 1, "one transaction");
  assert.ok(ip[0]?.startsWith("add table ip kpng\ndelete table ip kpng\n"), ip[0]?.slice(0, 80));
  assert.ok(!nft.transactions.some((t) => t.trim() === "delete table ip kpng"), "never deleted on its own");
  const fresh = setup();
  await fresh.backend.sync(state([service()]));
  assert.equal(nft.dump(), fresh.nft.dump());
  assert.equal(backend.health().healthy, true);
});

test("a replaced table too large for one transaction is deleted by the first, the rest follow in larger chunks", async () => {
  const { nft, backend } = setup({ max: 20 });
  await olderTable(nft);
  const texts = await syncThroughReset(nft, backend, state(manyServices(100)));
  const ip = texts.filter((t) => t.includes(" ip kpng"));
  assert.ok(ip.length > 1, `got ${ip.length}`);
  assert.ok(ip[0]?.startsWith("add table ip kpng\ndelete table ip kpng\n"));
  assert.ok(!ip.slice(1).some((t) => t.includes("delete table")));
  const fresh = setup({ max: 1_000_000 });
  await fresh.backend.sync(state(manyServices(100)));
  assert.equal(nft.dump(), fresh.nft.dump());
});

test("restart: an existing table is adopted without flushing it", async () => {
  const nft = new FakeNft();
  const first = setup({ nft });
  await first.backend.sync(state(manyServices(20)));
  let now = 1_000_000;
  const again = setup({ nft, now: () => now });
  const report = await sent(nft, again.backend, state(manyServices(20)));
  const text = report.texts.join("");
  assert.doesNotMatch(text, /delete table|flush table|flush map|flush chain ip kpng pick-tcp-2-g1/);
  // The endpoints of the other generation, then each dispatch element moved to them in place.
  assert.match(text, /add element ip kpng endpoints-tcp-g1 \{ 10\.96\.0\.0 \. 80 \. 0 : /);
  assert.match(text, /delete element ip kpng service-ips \{ 10\.96\.0\.0 \. tcp \. 80/);
  assert.equal(nft.elements("ip", "kpng", "service-ips")?.get("10.96.0.0 . tcp . 80"), "goto pick-tcp-2-g1");
  assert.ok(
    nft.listings.every((l) => !l.includes("endpoints-")),
    `the endpoint maps are not listed: ${nft.listings.join("; ")}`,
  );
  now += 1000;
  const changed = manyServices(19);
  await again.backend.sync(state(changed, 2));
  assert.equal(nft.elements("ip", "kpng", "endpoints-tcp"), undefined, "the old generation is gone");
  assert.equal(nft.rules("ip", "kpng", "pick-tcp-2"), undefined);
  const fresh = setup();
  await fresh.backend.sync(state(changed, 2));
  assert.equal(nft.elements("ip", "kpng", "service-ips")?.size, 19);
  now += 1000;
  await again.backend.sync(state(changed, 2));
  assert.equal(nft.dumpAnyGeneration(), fresh.nft.dumpAnyGeneration());
  // A second restart goes back to generation 0.
  const third = setup({ nft, now: () => now });
  await third.backend.sync(state(changed, 3));
  assert.equal(nft.elements("ip", "kpng", "service-ips")?.get("10.96.0.0 . tcp . 80"), "goto pick-tcp-2");
});

test("restart: after every transaction each dispatch element leads to a full list of endpoints", async () => {
  const nft = new FakeNft();
  await setup({ nft }).backend.sync(state(manyServices(600)));
  // Some services change while kpng is down: one endpoint fewer, one more.
  const next = manyServices(600).map((svc, i) => {
    if (i % 3 !== 0) return svc;
    const p = svc.ports[0]!;
    const eps = i % 2 === 0 ? p.internalEndpoints.slice(1) : [...p.internalEndpoints, ep(`198.51.100.${i}`)];
    return { ...svc, ports: [{ ...p, internalEndpoints: eps }] };
  });
  const broken: string[] = [];
  const checking = {
    run: async (text: string) => {
      await nft.run(text);
      for (const [key, verdict] of nft.elements("ip", "kpng", "service-ips") ?? []) {
        const m = /^goto (pick|ext-pick)-tcp-(\d+)(-g1)?$/.exec(verdict);
        if (m === null) continue;
        const map = nft.elements("ip", "kpng", `endpoints-tcp${m[3] ?? ""}`);
        const [ip, , port] = key.split(" . ");
        for (let i = 0; i < Number(m[2]); i++)
          if (!map?.has(`${ip} . ${port} . ${i}`)) broken.push(`${verdict} for ${key}: index ${i} missing`);
      }
    },
    check: (text: string) => nft.check(text),
    list: nft.list.bind(nft),
  };
  const restarted = new NftBackend({
    runner: checking,
    tables: [V4],
    log: silentLogger,
    maxStatementsPerTransaction: 8,
  });
  const before = nft.transactions.length;
  await restarted.sync(state(next, 2));
  assert.deepEqual(broken.slice(0, 5), []);
  const restart = nft.transactions.length - before;
  assert.ok(restart > 5, `the restart took many transactions: ${restart}`);
});

test("adoption removes elements and chains no service claims", async () => {
  const nft = new FakeNft();
  await nft.run(
    "add table ip kpng\nadd chain ip kpng svc-old\nadd map ip kpng service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }\n" +
      "add element ip kpng service-ips { 203.0.113.99 . tcp . 80 : goto svc-old }\n",
  );
  let now = 1_000_000;
  const { backend } = setup({ nft, now: () => now });
  await backend.sync(state([service()]));
  assert.equal(nft.elements("ip", "kpng", "service-ips")?.has("203.0.113.99 . tcp . 80"), false);
  now += 2000;
  await backend.sync(state([service()], 2));
  assert.equal(nft.rules("ip", "kpng", "svc-old"), undefined);
});

test("the loop coalesces states, retries after a failure and stops on abort", async () => {
  const nft = new FakeNft();
  const backend = new NftBackend({ runner: nft, tables: [V4], log: silentLogger });
  const feed = new ManualFeed();
  const ac = new AbortController();
  nft.failNext();
  const running = backend.run(feed, ac.signal);
  feed.push(state([service()]));
  feed.push(state([service({ name: "second" })], 2));
  const deadline = Date.now() + 5000;
  while (nft.elements("ip", "kpng", "service-ips")?.size !== 1 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  ac.abort();
  await running;
  assert.equal(feed.listener, undefined, "unsubscribed");
  assert.ok(nft.transactions.length >= 2, "retried after the injected failure");
  assert.equal(nft.elements("ip", "kpng", "service-ips")?.size, 1);
  assert.equal(nft.elements("ip", "kpng", "endpoints-tcp")?.size, 2);
});

test("the backend adds no pacing of its own: a state that arrives after a sync is applied at once", async () => {
  const nft = new FakeNft();
  const backend = new NftBackend({ runner: nft, tables: [V4], log: silentLogger });
  const feed = new ManualFeed();
  const ac = new AbortController();
  const running = backend.run(feed, ac.signal);
  const applied = async (size: number) => {
    const deadline = Date.now() + 2000;
    while (nft.elements("ip", "kpng", "service-ips")?.size !== size && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
    }
    return nft.elements("ip", "kpng", "service-ips")?.size === size;
  };
  feed.push(state([service()]));
  assert.ok(await applied(1));
  const sent = performance.now();
  feed.push(state([service(), service({ name: "second", clusterIPs: ["203.0.113.98"] })], 2));
  assert.ok(await applied(2));
  const waited = performance.now() - sent;
  ac.abort();
  await running;
  // --min-sync-period belongs to the feed (pacedFeed); a second pacer here would wait 1 s.
  assert.ok(waited < 500, `second state applied after ${waited.toFixed(0)} ms`);
});

test("the loop reports to its observer, and forceFullSync rewrites a table someone deleted", async () => {
  const nft = new FakeNft();
  const events: string[] = [];
  const backend = new NftBackend({
    runner: nft,
    tables: [V4],
    log: silentLogger,
    observer: {
      queued: (s) => events.push(`queued ${s.revision}`),
      synced: async (o) => {
        events.push(`synced ${o.state.revision} ${o.full ? "full" : "partial"}`);
      },
      failed: () => events.push("failed"),
    },
  });
  const feed = new ManualFeed();
  const until = async (what: string) => {
    const deadline = Date.now() + 5000;
    while (!events.includes(what) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(events.includes(what), `${what} in ${events.join(", ")}`);
  };
  const ac = new AbortController();
  nft.failNext();
  const running = backend.run(feed, ac.signal);
  feed.push(state([service()]));
  await until("synced 1 full");
  feed.push(state([service({ name: "second" })], 2));
  await until("synced 2 partial");
  await nft.run("delete table ip kpng\n");
  backend.forceFullSync();
  await until("synced 2 full");
  ac.abort();
  await running;
  assert.deepEqual(events.slice(0, 3), ["queued 1", "failed", "synced 1 full"]);
  assert.equal(nft.elements("ip", "kpng", "service-ips")?.size, 1, "the table is back");
});

test("a failed deletion of unused chains counts as kube-proxy's nftables cleanup failure, per family", async () => {
  let now = 1_000_000;
  const { nft, backend } = setup({ now: () => now });
  const failures = async () =>
    (await registry.getMetricsAsJSON())
      .find((m) => m.name === "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total")
      ?.values.find((v) => v.labels.ip_family === "IPv4")?.value ?? 0;
  await backend.sync(state([service({ sessionAffinitySeconds: 10 })]));
  await backend.sync(state([], 2));
  const before = await failures();
  now += 1100;
  nft.failNext((text) => text.includes("delete chain"));
  await assert.rejects(backend.sync(state([], 2)));
  assert.equal(await failures(), before + 1);
});

test("new node addresses: the running loop rewrites the table in place at once, the services' entries stay", async () => {
  const { nft, backend } = setup();
  const feed = new ManualFeed();
  const stop = new AbortController();
  const running = backend.run(feed, stop.signal);
  const svc = service();
  feed.push(state([svc]));
  const synced = (cond: () => boolean) => eventually(async () => cond(), "the sync", 5000);
  await synced(() => nft.elements("ip", "kpng", "nodeport-ips")?.has("192.0.2.1/32") === true);
  const before = nft.transactions.length;
  backend.reconfigure([{ ...V4, nodePortCIDRs: ["192.0.2.1/32", "192.0.2.7/32"] }, V6]);
  await synced(() => nft.elements("ip", "kpng", "nodeport-ips")?.has("192.0.2.7/32") === true);
  assert.ok(nft.elements("ip", "kpng", "nodeport-ips")?.has("192.0.2.1/32"));
  assert.match(
    nft.elements("ip", "kpng", "service-ips")?.get("203.0.113.10 . tcp . 80") ?? "",
    /^goto pick-tcp-2/,
  );
  // The entry is replaced in place (moved to the other generation's pick chain), never removed.
  for (const tx of nft.transactions.slice(before))
    if (tx.includes("delete element ip kpng service-ips { 203.0.113.10 . tcp . 80"))
      assert.match(tx, /add element ip kpng service-ips \{ 203\.0\.113\.10 \. tcp \. 80/);
  assert.doesNotMatch(nft.transactions.slice(before).join(""), /flush map ip kpng service-ips/);
  stop.abort();
  await running;
});
