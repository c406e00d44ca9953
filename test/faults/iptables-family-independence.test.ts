// Fault: to-iptables coupled its families. With IPv4 restores failing 40 % of the time, IPv6 never
// got a single KPNG-SERVICES rule (every failure forgot both families and stopped the sync); and a
// foreign chain jumping to a stale KPNG-SVC chain made every IPv4 restore fail for ever
// (`CHAIN_DEL … busy`: the deletion rode in the same COMMIT), and through the coupling IPv6 too.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { IptablesBackend } from "../../src/backends/iptables/backend.ts";
import { portChain } from "../../src/backends/iptables/names.ts";
import { silentLogger } from "../../src/observability/log.ts";
import { registry } from "../../src/observability/metrics.ts";
import { FakeIptables } from "../support/fake-iptables.ts";
import { ep, port, service, state, V4, V6 } from "../unit/backends/iptables/fixtures.ts";
import { capturingLogger, eventually, ManualFeed } from "./support.ts";

const v6Service = (name: string, ip: string) =>
  service({
    name,
    clusterIPs: [ip],
    ports: [port({ internalEndpoints: [ep("2001:db8:2::2")], endpointFamilies: ["IPv6"] })],
  });

/** The IPv6 cluster IPs KPNG-SERVICES dispatches. */
function v6Dispatched(ipt: FakeIptables): number {
  return (ipt.rules("IPv6", "nat", "KPNG-SERVICES") ?? []).filter((r) => /^-d 2001:db8::\d\d\/128 /.test(r))
    .length;
}

describe("fault: one iptables family's failure holds the other", () => {
  test("sync() programs IPv6 although every IPv4 restore fails", async () => {
    const ipt = new FakeIptables();
    ipt.failWhile = (family) => family === "IPv4";
    const backend = new IptablesBackend({ runner: ipt, families: [V4, V6], log: silentLogger });
    await assert.rejects(backend.sync(state([service(), v6Service("web6", "2001:db8::10")])));
    assert.equal(ipt.rules("IPv4", "nat", "KPNG-SERVICES"), undefined);
    assert.equal(v6Dispatched(ipt), 1);
    assert.deepEqual(
      backend.health().families.map((f) => [f.family, f.programmed, f.failures]),
      [
        ["IPv4", false, 1],
        ["IPv6", true, 0],
      ],
    );
  });

  test("with IPv4 restores failing 40 % of the time, the loop applies every IPv6 change promptly", {
    timeout: 20_000,
  }, async () => {
    const ipt = new FakeIptables();
    let n = 0;
    // Two of every five IPv4 restores fail.
    ipt.failWhile = (family) => family === "IPv4" && n++ % 5 < 2;
    const backend = new IptablesBackend({ runner: ipt, families: [V4, V6], log: silentLogger });
    const feed = new ManualFeed();
    const ac = new AbortController();
    const running = backend.run(feed, ac.signal);
    try {
      for (let i = 1; i <= 5; i++) {
        const services = Array.from({ length: i }, (_, k) => v6Service(`s${k}`, `2001:db8::${k + 10}`));
        feed.push(state([service(), ...services], i));
        await eventually(() => v6Dispatched(ipt) === i, `IPv6 change ${i}`, 700);
      }
      await eventually(() => backend.health().healthy, "IPv4 in line too after its retries", 10_000);
    } finally {
      ac.abort();
      await running;
    }
  });

  test("a foreign rule jumping to a stale KPNG-SVC chain fails neither the sync nor IPv6; the chain goes once freed", async () => {
    const ipt = new FakeIptables();
    const { log, lines } = capturingLogger();
    const backend = new IptablesBackend({ runner: ipt, families: [V4, V6], log });
    const old = service({ name: "old", clusterIPs: ["203.0.113.11"] });
    await backend.sync(state([service(), old, v6Service("web6", "2001:db8::10")]));
    const stale = portChain.internal("default/old/tcp/80");
    assert.ok(ipt.rules("IPv4", "nat", stale));
    ipt.edit("IPv4", "nat", (c) => c.set("SOMEONE-ELSE", [`-j ${stale}`]));

    // The Service goes away while another program still jumps to its chain.
    const next = state([service(), v6Service("web6", "2001:db8::10"), v6Service("new6", "2001:db8::11")], 2);
    const report = await backend.sync(next);
    assert.equal(report.full, false, "no failure, so no full resync");
    assert.equal(backend.health().healthy, true);
    assert.ok(!ipt.rules("IPv4", "nat", "KPNG-SERVICES")?.some((r) => r.includes(stale)), "not dispatched");
    assert.ok(ipt.rules("IPv4", "nat", stale), "left in place while referenced");
    assert.equal(v6Dispatched(ipt), 2, "IPv6 followed");
    const warning = lines.find(
      (l) => l.level === 40 && /cannot delete unused kpng chains/.test(String(l.msg)),
    );
    assert.deepEqual(warning?.chains, [stale, portChain.hairpin(stale)].sort());
    assert.match(String(warning?.stderr), /CHAIN_DEL failed \(Device or resource busy\)/);
    const counted = await registry
      .getSingleMetric("kpng_iptables_stale_chain_deletion_failures_total")
      ?.get();
    assert.ok((counted?.values.find((v) => v.labels.family === "IPv4")?.value ?? 0) >= 1, "counted");

    // Further syncs go on (the busy chain is retried, never fatal); once freed, it is deleted.
    await backend.sync(state([service(), v6Service("web6", "2001:db8::10")], 3));
    assert.equal(backend.health().healthy, true);
    ipt.edit("IPv4", "nat", (c) => c.delete("SOMEONE-ELSE"));
    await backend.sync(state([service()], 4));
    assert.equal(ipt.rules("IPv4", "nat", stale), undefined);
  });
});
