import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ConntrackCleaner } from "../../../src/node/conntrack/cleaner.ts";
import type { ConntrackRunner } from "../../../src/node/conntrack/runner.ts";
import {
  applySysctls,
  CONNTRACK_SYSCTL_DEFAULTS,
  conntrackSysctls,
  type SysctlFiles,
} from "../../../src/node/conntrack/sysctls.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { ep, port, service, state } from "../backends/nft/fixtures.ts";

class FakeConntrack implements ConntrackRunner {
  batches: string[][] = [];
  fail = false;
  async deleteBatch(lines: readonly string[]): Promise<number> {
    if (this.fail) throw new Error("conntrack: timeout");
    this.batches.push([...lines]);
    return lines.length;
  }
}

const dns = (ips: string[]) => {
  const eps = ips.map((ip) => ep(ip));
  return service({
    name: "dns",
    ports: [port({ protocol: "UDP", port: 53, internalEndpoints: eps, externalEndpoints: eps })],
  });
};

async function metric(name: string): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values ?? []).reduce((sum, v) => sum + (v.value as number), 0);
}

describe("ConntrackCleaner", () => {
  test("the first state is only a baseline; later changes go out as one batch", async () => {
    const ct = new FakeConntrack();
    const c = new ConntrackCleaner(ct, silentLogger);
    assert.equal(c.cleanup(state([dns(["198.51.100.2", "198.51.100.3"])])), 0);
    await c.idle();
    assert.deepEqual(ct.batches, []);
    const deletedBefore = await metric("kubeproxy_conntrack_reconciler_deleted_entries_total");
    assert.equal(c.cleanup(state([dns([])], 2)), 2);
    await c.idle();
    assert.deepEqual(ct.batches, [
      [
        "-D -f ipv4 -p udp --orig-dst 203.0.113.10 --dport 53 --reply-src 198.51.100.2",
        "-D -f ipv4 -p udp --orig-dst 203.0.113.10 --dport 53 --reply-src 198.51.100.3",
      ],
    ]);
    assert.equal(await metric("kubeproxy_conntrack_reconciler_deleted_entries_total"), deletedBefore + 2);
  });

  test("a failing conntrack is logged and counted, never thrown", async () => {
    const ct = new FakeConntrack();
    const c = new ConntrackCleaner(ct, silentLogger);
    c.cleanup(state([dns(["198.51.100.2"])]));
    ct.fail = true;
    const before = await metric("kpng_conntrack_cleanup_failures_total");
    c.cleanup(state([dns([])], 2));
    await c.idle();
    assert.equal(await metric("kpng_conntrack_cleanup_failures_total"), before + 1);
  });
});

test("a slow conntrack does not hold up the caller; what piles up meanwhile goes in the next batch", async () => {
  let release = () => {};
  const batches: string[][] = [];
  const slow: ConntrackRunner = {
    deleteBatch: (lines) => {
      batches.push([...lines]);
      return new Promise((r) => {
        release = () => r(lines.length);
      });
    },
  };
  const c = new ConntrackCleaner(slow, silentLogger);
  c.cleanup(state([dns(["198.51.100.2", "198.51.100.3", "198.51.100.4"])]));
  c.cleanup(state([dns(["198.51.100.3", "198.51.100.4"])], 2));
  c.cleanup(state([dns(["198.51.100.4"])], 3));
  c.cleanup(state([dns([])], 4));
  assert.equal(batches.length, 1, "one batch at a time");
  release();
  await new Promise((r) => setImmediate(r));
  release();
  await c.idle();
  assert.deepEqual(
    batches.map((b) => b.length),
    [1, 2],
  );
});

describe("conntrack sysctls", () => {
  test("max is per core with a floor; 0 leaves a setting alone", () => {
    const o = {
      ...CONNTRACK_SYSCTL_DEFAULTS,
      maxPerCore: 32768,
      min: 131072,
      tcpEstablishedSeconds: 86400,
      tcpCloseWaitSeconds: 0,
    };
    assert.deepEqual(conntrackSysctls(o, 2), [
      { name: "net/netfilter/nf_conntrack_max", value: 131072 },
      { name: "net/netfilter/nf_conntrack_tcp_timeout_established", value: 86400 },
    ]);
    assert.equal(conntrackSysctls(o, 8)[0]?.value, 262144);
    assert.deepEqual(conntrackSysctls({ ...o, maxPerCore: 0, tcpEstablishedSeconds: 0 }, 8), []);
  });

  test("kube-proxy's zeros leave every sysctl alone; UDP timeouts and liberal TCP when set", () => {
    const zeros = {
      ...CONNTRACK_SYSCTL_DEFAULTS,
      maxPerCore: 0,
      min: 0,
      tcpEstablishedSeconds: 0,
      tcpCloseWaitSeconds: 0,
    };
    assert.deepEqual(conntrackSysctls(zeros, 4), []);
    assert.deepEqual(
      conntrackSysctls({ ...zeros, tcpBeLiberal: true, udpSeconds: 30, udpStreamSeconds: 120 }, 4),
      [
        { name: "net/netfilter/nf_conntrack_tcp_be_liberal", value: 1 },
        { name: "net/netfilter/nf_conntrack_udp_timeout", value: 30 },
        { name: "net/netfilter/nf_conntrack_udp_timeout_stream", value: 120 },
      ],
    );
  });

  test("writes only what differs, and skips a read-only file without throwing", async () => {
    const files = new Map([
      ["a", "5"],
      ["b", "1"],
      ["ro", "1"],
    ]);
    const fake: SysctlFiles = {
      read: async (n) => files.get(n) ?? "",
      write: async (n, v) => {
        if (n === "ro") throw Object.assign(new Error("EROFS: read-only file system"), { code: "EROFS" });
        files.set(n, v);
      },
    };
    const written = await applySysctls(
      [
        { name: "a", value: 5 },
        { name: "ro", value: 9 },
        { name: "b", value: 7 },
      ],
      fake,
      silentLogger,
    );
    assert.deepEqual(written, ["b"]);
    assert.equal(files.get("b"), "7");
    assert.equal(files.get("ro"), "1");
  });
});
