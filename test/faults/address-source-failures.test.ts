// Fault: the source of the node's addresses fails or hangs while kpng runs. The rules keep the
// last good addresses (nothing is removed), Service changes keep being synced, the failure is
// logged and counted, and once the source answers again a new address reaches the rules.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { followNode, rulesAddresses, watchNode } from "../../src/backend-core/node-watch.ts";
import { NftBackend } from "../../src/backends/nft/backend.ts";
import { type NftSettings, tableConfigs } from "../../src/backends/nft/config.ts";
import { type HostAddresses, HostAddressWatch } from "../../src/host/address-watch.ts";
import { registry } from "../../src/observability/metrics.ts";
import { FakeClock } from "../support/fake-clock.ts";
import { FakeNft } from "../support/fake-nft.ts";
import { service, state } from "../unit/backends/nft/fixtures.ts";
import { capturingLogger, eventually, ManualFeed } from "./support.ts";

const SETTINGS: NftSettings = {
  table: "kpng",
  nodePortAddresses: "primary",
  clusterCIDRs: "",
  masqueradeAll: false,
};
const START: HostAddresses = { all: ["127.0.0.1", "192.0.2.1"], primary: ["192.0.2.1"] };
/** A second address on the default-route interface: a second primary address. */
const ADDED: HostAddresses = {
  all: ["127.0.0.1", "192.0.2.1", "192.0.2.7"],
  primary: ["192.0.2.1", "192.0.2.7"],
};

async function failures(reason: string): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find(
    (x) => x.name === "kpng_host_address_read_failures_total",
  );
  return Number(m?.values.find((v) => v.labels.reason === reason)?.value ?? 0);
}

describe("fault: the node's addresses cannot be read", () => {
  test("failing, then hanging: the rules stay, Services still sync; answering again, the new address is used", {
    timeout: 30_000,
  }, async () => {
    const { log, lines } = capturingLogger();
    const clock = new FakeClock();
    let answer: () => Promise<HostAddresses> = () =>
      Promise.reject(new Error("ip: Cannot open netlink socket"));
    const addresses = new HostAddressWatch({
      read: () => answer(),
      initial: START,
      clock,
      log,
      intervalMs: 5000,
      timeoutMs: 5000,
    }).start();
    const feed = new ManualFeed(state([service()]));
    const nft = new FakeNft();
    const stop = new AbortController();
    const watching = watchNode(feed, addresses, stop.signal, { ips: false, podCIDRs: false });
    const watch = await watching;
    const tables = (facts = watch.current()) => tableConfigs(SETTINGS, facts.primaryIPs, facts.podCIDRs);
    const backend = new NftBackend({ runner: nft, tables: tables(), log });
    followNode(watch, {
      backend: "nftables",
      log,
      derive: (facts) => rulesAddresses(SETTINGS, facts),
      apply: (_, facts) => backend.reconfigure(tables(facts)),
    });
    const running = backend.run(feed, stop.signal);
    await eventually(() => nft.elements("ip", "kpng", "service-ips")?.size === 1, "the first sync");

    const errorsBefore = await failures("error");
    await clock.advance(5000);
    assert.equal(await failures("error"), errorsBefore + 1);
    assert.ok(lines.some((l) => /cannot re-read the node's addresses/.test(String(l.msg))));

    answer = () => new Promise(() => {});
    const timeoutsBefore = await failures("timeout");
    await clock.advance(10_000);
    assert.equal(await failures("timeout"), timeoutsBefore + 1);
    assert.deepEqual(watch.current().hostIPs, START.all, "the last good addresses");
    assert.deepEqual([...(nft.elements("ip", "kpng", "nodeport-ips")?.keys() ?? [])], ["192.0.2.1/32"]);

    // Service changes are not held up by the address source.
    feed.push(state([service(), service({ name: "other", clusterIPs: ["203.0.113.11"] })], 2));
    await eventually(() => nft.elements("ip", "kpng", "service-ips")?.size === 2, "a Service change synced");

    answer = () => Promise.resolve(ADDED);
    await clock.advance(5000);
    assert.ok(lines.some((l) => /can be read again/.test(String(l.msg))));
    await eventually(
      () => nft.elements("ip", "kpng", "nodeport-ips")?.has("192.0.2.7/32") === true,
      "the new address in the rules",
    );
    assert.ok(lines.some((l) => /the node's addresses changed/.test(String(l.msg))));
    assert.equal(nft.elements("ip", "kpng", "service-ips")?.size, 2);
    stop.abort();
    await running;
    addresses.stop();
    watch.stop();
  });
});
