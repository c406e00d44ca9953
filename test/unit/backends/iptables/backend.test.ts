import assert from "node:assert/strict";
import { test } from "node:test";
import { IptablesBackend } from "../../../../src/backends/iptables/backend.ts";
import { portChain } from "../../../../src/backends/iptables/names.ts";
import type { LocalState } from "../../../../src/model/local.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { registry } from "../../../../src/observability/metrics.ts";
import { FakeIptables } from "../../../support/fake-iptables.ts";
import { ep, manyServices, port, service, state, V4, V6 } from "./fixtures.ts";

function setup(ipt = new FakeIptables()) {
  return { ipt, backend: new IptablesBackend({ runner: ipt, families: [V4, V6], log: silentLogger }) };
}

/** A feed that hands one state to each subscriber. */
const feedOf = (s: ReturnType<typeof state>) => ({
  subscribe(listener: (s: ReturnType<typeof state>) => void) {
    listener(s);
    return () => {};
  },
});

async function eventually(check: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + 5000;
  while (!check()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** One sync, with the IPv4 restore inputs it applied, joined (the report counts them, keeps no text). */
async function syncV4(ipt: FakeIptables, backend: IptablesBackend, s: LocalState) {
  const from = ipt.restores.length;
  const report = await backend.sync(s);
  const written = ipt.restores.slice(from);
  assert.equal(report.transactions, written.length);
  assert.equal(report.bytes, Buffer.byteLength(written.map((r) => r.text).join("")));
  const v4 = written.filter((r) => r.family === "IPv4").map((r) => r.text);
  return { ...report, v4: v4.join("") };
}

const declared = (text: string) => text.split("\n").filter((l) => l.startsWith(":"));

test("first sync is full: shared chains, service chains, jumps from the built-in chains, canaries", async () => {
  const { ipt, backend } = setup();
  const report = await backend.sync(state([service()]));
  assert.equal(report.full, true);
  assert.deepEqual(ipt.rules("IPv4", "nat", "PREROUTING"), ["-j KPNG-SERVICES"]);
  assert.deepEqual(ipt.rules("IPv4", "filter", "INPUT"), [
    "-m conntrack --ctstate NEW -j KPNG-FIREWALL",
    "-m conntrack --ctstate NEW -j KPNG-NODEPORTS",
    "-m conntrack --ctstate NEW -j KPNG-SERVICES",
  ]);
  assert.ok(ipt.rules("IPv4", "nat", portChain.internal("default/web/tcp/80")));
  for (const table of ["mangle", "nat", "filter"] as const)
    assert.ok(await ipt.chainExists("IPv6", table, "KPNG-CANARY"));
});

test("a partial sync rewrites only the changed service's chains (the shared ones did not change)", async () => {
  const { ipt, backend } = setup();
  const services = manyServices(50);
  await backend.sync(state(services));
  const changed = service({
    ...services[7],
    ports: [port({ internalEndpoints: [ep("10.1.0.7"), ep("10.9.9.9")] })],
  });
  const next = services.map((s, i) => (i === 7 ? changed : s));
  const report = await syncV4(ipt, backend, state(next, 2));
  assert.equal(report.full, false);
  const v4 = report.v4;
  const svc7 = portChain.internal("default/svc-7/tcp/80");
  const hp7 = portChain.hairpin(svc7);
  const nat = v4.slice(v4.indexOf("*nat"));
  const names = (text: string) =>
    declared(text)
      .map((l) => l.slice(1, -" - [0:0]".length))
      .sort();
  assert.deepEqual(names(nat), [svc7, hp7].sort());
  assert.doesNotMatch(nat, /^-X /m);
  assert.ok(ipt.rules("IPv4", "nat", svc7)?.some((r) => r.includes("--to-destination 10.9.9.9:8080")));
  assert.doesNotMatch(v4, /-I |-D /, "no jump repairs in a partial sync");
  assert.doesNotMatch(v4, /\*filter/, "the filter table did not change");
  // Down to one endpoint: no hairpin chain any more; it is deleted by a restore of its own after.
  const single = service({
    ...services[7],
    ports: [port({ internalEndpoints: [ep("10.1.0.7")] })],
  });
  const again = await syncV4(
    ipt,
    backend,
    state(
      services.map((s, i) => (i === 7 ? single : s)),
      3,
    ),
  );
  const nat2 = again.v4.slice(again.v4.indexOf("*nat"));
  assert.deepEqual(names(nat2), [svc7, hp7].sort());
  assert.match(nat2, new RegExp(`^-X ${hp7}$`, "m"));
  assert.equal(ipt.rules("IPv4", "nat", hp7), undefined);
});

test("an unchanged state runs no restore at all", async () => {
  const { ipt, backend } = setup();
  const s = state(manyServices(5));
  await backend.sync(s);
  const before = ipt.restores.length;
  await backend.sync(s);
  assert.equal(ipt.restores.length, before);
});

test("a new service rewrites the shared dispatch chains", async () => {
  const { ipt, backend } = setup();
  await backend.sync(state([service()]));
  const report = await syncV4(
    ipt,
    backend,
    state([service(), service({ name: "b", clusterIPs: ["203.0.113.11"] })], 2),
  );
  assert.match(report.v4, /^:KPNG-SERVICES /m);
  assert.ok(ipt.rules("IPv4", "nat", "KPNG-SERVICES")?.some((r) => r.includes("203.0.113.11")));
});

test("a removed service's chains are deleted, and nothing references them", async () => {
  const { ipt, backend } = setup();
  await backend.sync(state([service(), service({ name: "other", clusterIPs: ["203.0.113.11"] })]));
  await backend.sync(state([service()], 2));
  assert.equal(ipt.rules("IPv4", "nat", portChain.internal("default/other/tcp/80")), undefined);
  assert.ok(ipt.rules("IPv4", "nat", portChain.internal("default/web/tcp/80")));
});

test("a failed restore makes the next sync a full one, which converges the tables", async () => {
  const { ipt, backend } = setup();
  await backend.sync(state([service()]));
  ipt.failNext = 1;
  await assert.rejects(backend.sync(state([service({ name: "b", clusterIPs: ["203.0.113.11"] })], 2)));
  assert.equal(backend.needsFullSync, true);
  const report = await backend.sync(state([service({ name: "b", clusterIPs: ["203.0.113.11"] })], 2));
  assert.equal(report.full, true);
  assert.equal(ipt.rules("IPv4", "nat", portChain.internal("default/web/tcp/80")), undefined);
});

test("adoption: a new process keeps the jumps, deletes stale KPNG chains and leaves others alone", async () => {
  const ipt = new FakeIptables();
  await setup(ipt).backend.sync(state([service(), service({ name: "old", clusterIPs: ["203.0.113.12"] })]));
  ipt.edit("IPv4", "nat", (c) => {
    c.set("SOMEONE-ELSE", ["-j RETURN"]);
    c.get("PREROUTING")?.push("-j SOMEONE-ELSE");
  });
  const restarted = setup(ipt).backend;
  const report = await syncV4(ipt, restarted, state([service()]));
  assert.equal(report.full, true);
  assert.doesNotMatch(report.v4, /^-[ID] /m, "jumps already right: not touched");
  assert.equal(ipt.rules("IPv4", "nat", portChain.internal("default/old/tcp/80")), undefined);
  assert.deepEqual(ipt.rules("IPv4", "nat", "PREROUTING"), ["-j KPNG-SERVICES", "-j SOMEONE-ELSE"]);
  assert.deepEqual(ipt.rules("IPv4", "nat", "SOMEONE-ELSE"), ["-j RETURN"]);
});

test("a full sync after the nat table was flushed restores everything", async () => {
  const { ipt, backend } = setup();
  await backend.sync(state([service()]));
  ipt.edit("IPv4", "nat", (c) => {
    for (const name of [...c.keys()]) if (name.startsWith("KPNG-")) c.delete(name);
    for (const rules of c.values()) rules.length = 0;
  });
  await backend.sync(state([service()]), true);
  assert.deepEqual(ipt.rules("IPv4", "nat", "PREROUTING"), ["-j KPNG-SERVICES"]);
  assert.ok(ipt.rules("IPv4", "nat", portChain.internal("default/web/tcp/80")));
});

test("plan() is the full restore input, accepted by a fresh table", async () => {
  const ipt = new FakeIptables();
  const { backend } = setup(new FakeIptables());
  for (const [i, text] of backend.plan(state([service()])).entries())
    await ipt.restore(i === 0 ? "IPv4" : "IPv6", text, { test: true });
});

for (const [what, tamper] of [
  ["a flushed KPNG-SERVICES chain", (c: Map<string, string[]>) => c.get("KPNG-SERVICES")?.splice(0)],
  [
    "a flushed nat table",
    (c: Map<string, string[]>) => {
      for (const rules of c.values()) rules.length = 0;
    },
  ],
  [
    "deleted kpng chains",
    (c: Map<string, string[]>) => {
      for (const rules of c.values()) rules.length = 0;
      for (const name of [...c.keys()]) if (name.startsWith("KPNG-")) c.delete(name);
    },
  ],
] as const) {
  test(`run(): ${what} between syncs brings a full sync within the probe interval`, async () => {
    const ipt = new FakeIptables();
    const backend = new IptablesBackend({
      runner: ipt,
      families: [V4, V6],
      log: silentLogger,
      canaryIntervalMs: 20,
    });
    const ac = new AbortController();
    const running = backend.run(feedOf(state([service()])), ac.signal);
    // Only a full sync writes the mangle table (its canary).
    const fullSyncs = () =>
      ipt.restores.filter((r) => r.family === "IPv4" && r.text.startsWith("*mangle")).length;
    try {
      await eventually(() => fullSyncs() === 1, "the first sync");
      const checks = ipt.checks;
      await eventually(() => ipt.checks > checks + 8, "the probe runs");
      assert.equal(fullSyncs(), 1, "rules in place: no resync");
      ipt.edit("IPv4", "nat", tamper);
      await eventually(() => fullSyncs() === 2, "a repair");
      assert.ok(ipt.rules("IPv4", "nat", "KPNG-SERVICES")?.length);
      assert.deepEqual(ipt.rules("IPv4", "nat", "PREROUTING"), ["-j KPNG-SERVICES"]);
      assert.equal(
        ipt.restores.filter((r) => r.family === "IPv6" && r.text.startsWith("*mangle")).length,
        1,
        "IPv6 untouched",
      );
    } finally {
      ac.abort();
      await running;
    }
  });
}

test("Service ranges: after the reject of allocated cluster IPs, the rest of each range is dropped; a change of ranges rewrites only that chain", async () => {
  const { ipt, backend } = setup();
  const ranges = ["203.0.113.0/24", "2001:db8:1::/112"];
  await backend.sync(state([service()], 1, ranges));
  const v4 = ipt.rules("IPv4", "filter", "KPNG-SERVICES") ?? [];
  const reject = v4.findIndex((r) => r.endsWith("-j REJECT"));
  const drop = v4.indexOf("-d 203.0.113.0/24 -j DROP");
  assert.ok(reject >= 0 && drop > reject, v4.join("\n"));
  assert.ok((ipt.rules("IPv6", "filter", "KPNG-SERVICES") ?? []).includes("-d 2001:db8:1::/112 -j DROP"));
  const before = ipt.restores.length;
  await backend.sync(state([service()], 2, []));
  assert.ok(!(ipt.rules("IPv4", "filter", "KPNG-SERVICES") ?? []).some((r) => r.endsWith("-j DROP")));
  const partial = ipt.restores
    .slice(before)
    .map((r) => r.text)
    .join("\n");
  assert.doesNotMatch(partial, /^:KPNG-SVC/m, "no service chain rewritten");
});

test("many chains to write go in several nat restores: each service whole, the dispatch chains last; the result is the same", async () => {
  const one = new FakeIptables();
  const split = new FakeIptables();
  const services = manyServices(12);
  await new IptablesBackend({ runner: one, families: [V4], log: silentLogger }).sync(state(services));
  const backend = new IptablesBackend({ runner: split, families: [V4], log: silentLogger, chunkChains: 5 });
  await backend.sync(state(services));
  const nat = split.restores.map((r) => r.text).filter((t) => t.startsWith("*nat"));
  assert.ok(nat.length >= 4, `${nat.length} nat restores`);
  assert.match(nat.at(-1) ?? "", /^:KPNG-SERVICES /m);
  assert.match(nat.at(-1) ?? "", /^-I PREROUTING 1 -j KPNG-SERVICES$/m);
  for (const [i, text] of nat.entries()) {
    if (i < nat.length - 1) assert.doesNotMatch(text, /^:KPNG-SERVICES /m);
    for (const svcName of ["svc-3", "svc-9"]) {
      const svc = portChain.internal(`default/${svcName}/tcp/80`);
      if (text.includes(`:${svc} `)) assert.match(text, new RegExp(`^:${portChain.hairpin(svc)} `, "m"));
    }
  }
  for (const chain of ["KPNG-SERVICES", portChain.internal("default/svc-11/tcp/80")])
    assert.deepEqual(split.rules("IPv4", "nat", chain), one.rules("IPv4", "nat", chain));
  // A partial sync of one service stays one restore (its unused hairpin chain goes in another).
  const before = split.restores.length;
  const changed = service({
    ...services[4],
    ports: [port({ internalEndpoints: [ep("10.9.9.9")] })],
  });
  await backend.sync(
    state(
      services.map((s, i) => (i === 4 ? changed : s)),
      2,
    ),
  );
  const written = split.restores.slice(before);
  assert.equal(written.filter((r) => !/^-X /m.test(r.text)).length, 1);
});

test("a changed service whose dispatch lines change rewrites the dispatch chain; an endpoint change does not", async () => {
  const { ipt, backend } = setup();
  const services = manyServices(3);
  await backend.sync(state(services));
  const moved = service({ ...services[1], ports: [port({ port: 8443 })] });
  const report = await syncV4(
    ipt,
    backend,
    state(
      services.map((s, i) => (i === 1 ? moved : s)),
      2,
    ),
  );
  assert.match(report.v4, /^:KPNG-SERVICES /m);
  assert.ok(ipt.rules("IPv4", "nat", "KPNG-SERVICES")?.some((r) => r.includes("--dport 8443")));
  const eps = service({
    ...moved,
    ports: [port({ port: 8443, internalEndpoints: [ep("10.9.9.9")] })],
  });
  const again = await syncV4(
    ipt,
    backend,
    state(
      services.map((s, i) => (i === 1 ? eps : s)),
      3,
    ),
  );
  assert.doesNotMatch(again.v4, /^:KPNG-SERVICES /m);
});

test("rule metrics: rules kpng owns per table and family, rules the last sync wrote, failed partial restores", async () => {
  const { ipt, backend } = setup();
  const gauge = async (name: string, labels: Record<string, string>) =>
    (await registry.getMetricsAsJSON())
      .find((m) => m.name === name)
      ?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
  const owned = (table: "nat" | "filter") =>
    ipt
      .chains("IPv4", table)
      .filter((c) => c.startsWith("KPNG-"))
      .reduce((n, c) => n + (ipt.rules("IPv4", table, c)?.length ?? 0), 0);
  const services = manyServices(20);
  await backend.sync(state(services));
  for (const table of ["nat", "filter"] as const) {
    const labels = { table, ip_family: "IPv4" };
    assert.equal(await gauge("kubeproxy_sync_proxy_rules_iptables_total", labels), owned(table), table);
    assert.equal(
      await gauge("kubeproxy_sync_proxy_rules_iptables_last", labels),
      owned(table),
      "a full sync writes all",
    );
  }
  const changed = service({
    ...services[3],
    ports: [port({ internalEndpoints: [ep("10.1.0.3"), ep("10.9.9.9")] })],
  });
  await backend.sync(
    state(
      services.map((s, i) => (i === 3 ? changed : s)),
      2,
    ),
  );
  const nat = { table: "nat", ip_family: "IPv4" };
  assert.equal(await gauge("kubeproxy_sync_proxy_rules_iptables_total", nat), owned("nat"));
  const last = (await gauge("kubeproxy_sync_proxy_rules_iptables_last", nat)) ?? 0;
  assert.ok(last > 0 && last < owned("nat"), `a partial sync writes the changed chains only (${last})`);
  const failures = { ip_family: "IPv4" };
  const before =
    (await gauge("kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", failures)) ?? 0;
  ipt.failWhile = (family) => family === "IPv4";
  await assert.rejects(backend.sync(state(services, 3)));
  assert.equal(
    await gauge("kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", failures),
    before + 1,
  );
  await assert.rejects(backend.sync(state(services, 4)));
  assert.equal(
    await gauge("kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", failures),
    before + 1,
    "the retry is a full sync: not a partial restore failure",
  );
});

test("new node addresses: the running loop rewrites the rules at once, with the new NodePort addresses", async () => {
  const { ipt, backend } = setup();
  const stop = new AbortController();
  const running = backend.run(feedOf(state([service()])), stop.signal);
  const nodePortJumps = () =>
    (ipt.rules("IPv4", "nat", "KPNG-SERVICES") ?? []).filter((r) => r.endsWith("-j KPNG-NODEPORTS"));
  await eventually(() => nodePortJumps().length === 1, "the first sync");
  backend.reconfigure([{ ...V4, nodePortCIDRs: ["192.0.2.1/32", "192.0.2.7/32"] }, V6]);
  await eventually(() => nodePortJumps().length === 2, "the new NodePort address");
  assert.deepEqual(nodePortJumps(), [
    "-d 192.0.2.1/32 -m addrtype --dst-type LOCAL -j KPNG-NODEPORTS",
    "-d 192.0.2.7/32 -m addrtype --dst-type LOCAL -j KPNG-NODEPORTS",
  ]);
  stop.abort();
  await running;
});
