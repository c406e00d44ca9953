import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { sharedSmallSpawner } from "../../../src/host/small-spawner.ts";
import { ConntrackCleaner } from "../../../src/node/conntrack/cleaner.ts";
import { type ConntrackRunner, ExecConntrackRunner } from "../../../src/node/conntrack/runner.ts";
import {
  applySysctls,
  CONNTRACK_SYSCTL_DEFAULTS,
  conntrackSysctls,
  type SysctlFiles,
} from "../../../src/node/conntrack/sysctls.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { countedState } from "../../support/counting-services.ts";
import { ep, port, service, state } from "../backends/nft/fixtures.ts";

class FakeConntrack implements ConntrackRunner {
  batches: string[][] = [];
  fail = false;
  /** What `conntrack -L -o extended` prints, per protocol. */
  table: Record<string, string[]> = {};
  async list(protocol: "udp" | "sctp", onLine: (line: string) => void): Promise<void> {
    for (const line of this.table[protocol] ?? []) onLine(line);
  }
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

  test("one family per batch: each family's deletions and time are its own (ip_family)", async () => {
    const ct = new FakeConntrack();
    const c = new ConntrackCleaner(ct, silentLogger);
    const dual = (ips: string[]) => {
      const eps = ips.map((ip) => ep(ip));
      return service({
        name: "dns",
        clusterIPs: ["203.0.113.10", "2001:db8::10"],
        ports: [
          port({
            protocol: "UDP",
            port: 53,
            internalEndpoints: eps,
            externalEndpoints: eps,
          }),
        ],
      });
    };
    c.cleanup(state([dual(["198.51.100.2", "2001:db8::2"])]));
    await c.idle();
    const byFamily = async (family: string) =>
      (await registry.getMetricsAsJSON())
        .find((x) => x.name === "kubeproxy_conntrack_reconciler_deleted_entries_total")
        ?.values.find((v) => v.labels.ip_family === family)?.value ?? 0;
    const before = { v4: await byFamily("IPv4"), v6: await byFamily("IPv6") };
    c.cleanup(state([dual([])], 2));
    await c.idle();
    assert.equal(ct.batches.length, 2);
    for (const batch of ct.batches)
      assert.equal(new Set(batch.map((l) => l.split(" ")[2])).size, 1, batch.join("\n"));
    assert.equal(await byFamily("IPv4"), before.v4 + ct.batches.find((b) => b[0]?.includes("ipv4"))!.length);
    assert.equal(await byFamily("IPv6"), before.v6 + ct.batches.find((b) => b[0]?.includes("ipv6"))!.length);
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
    list: async () => {},
    deleteBatch: (lines) => {
      batches.push([...lines]);
      return new Promise((r) => {
        release = () => r(lines.length);
      });
    },
  };
  const c = new ConntrackCleaner(slow, silentLogger);
  c.cleanup(state([dns(["198.51.100.2", "198.51.100.3", "198.51.100.4"])]));
  await c.idle(); // the first state's reconciliation: an empty table
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

describe("conntrack after a restart", () => {
  // A client 192.0.2.5 talking to the dns Service (203.0.113.10:53, node port 30053) through
  // endpoints .2 (still one) and .9 (removed while kpng was down), and a flow no Service DNATs.
  const entry = (dst: string, dport: number, replySrc: string) =>
    `ipv4     2 udp      17 29 src=192.0.2.5 dst=${dst} sport=5000 dport=${dport} src=${replySrc} dst=192.0.2.5 sport=53 dport=5000 mark=0 use=1`;
  const dnsWithNodePort = (ips: string[]) => {
    const eps = ips.map((ip) => ep(ip));
    return service({
      name: "dns",
      ports: [
        port({
          protocol: "UDP",
          port: 53,
          nodePort: 30053,
          internalEndpoints: eps,
          externalEndpoints: eps,
        }),
      ],
    });
  };

  test("the first state deletes the entries DNATed to what is no longer an endpoint, and only those", async () => {
    const ct = new FakeConntrack();
    ct.table.udp = [
      entry("203.0.113.10", 53, "198.51.100.2"),
      entry("203.0.113.10", 53, "198.51.100.9"),
      entry("192.0.2.1", 30053, "198.51.100.9"),
      entry("192.0.2.1", 30053, "198.51.100.2"),
      entry("192.0.2.77", 53, "192.0.2.77"),
      entry("203.0.113.99", 53, "198.51.100.9"),
      "conntrack v1.4.7 (conntrack-tools): 6 flow entries have been shown.",
    ];
    const c = new ConntrackCleaner(ct, silentLogger);
    c.cleanup(state([dnsWithNodePort(["198.51.100.2"])]));
    await c.idle();
    assert.deepEqual(ct.batches, [
      [
        "-D -f ipv4 -p udp --orig-dst 203.0.113.10 --dport 53 --reply-src 198.51.100.9",
        "-D -f ipv4 -p udp --dport 30053 --reply-src 198.51.100.9",
      ],
    ]);
  });

  test("the Services are walked only when the table holds Service flows, once per chunk of them", async () => {
    // A state that counts the walks over its services (100k Services at a restart).
    const reads = { walks: 0, lookups: 0 };
    const counted = countedState(state([dnsWithNodePort(["198.51.100.2"])]), reads);
    const ct = new FakeConntrack();
    // Not translated (a flow to the node itself), and not UDP: nothing to judge.
    ct.table.udp = [entry("192.0.2.77", 53, "192.0.2.77")];
    const quiet = new ConntrackCleaner(ct, silentLogger);
    quiet.cleanup(counted);
    await quiet.idle();
    assert.equal(reads.walks, 0);
    ct.table.udp = Array.from({ length: 3 }, () => entry("203.0.113.10", 53, "198.51.100.9"));
    const busy = new ConntrackCleaner(ct, silentLogger);
    busy.cleanup(counted);
    await busy.idle();
    assert.equal(reads.walks, 1);
    assert.deepEqual(ct.batches, [
      ["-D -f ipv4 -p udp --orig-dst 203.0.113.10 --dport 53 --reply-src 198.51.100.9"],
    ]);
  });

  test("a failing listing is logged and counted; later changes still go out", async () => {
    const ct = new FakeConntrack();
    ct.list = async () => {
      throw new Error("conntrack -L exited 1");
    };
    const before = await metric("kpng_conntrack_cleanup_failures_total");
    const c = new ConntrackCleaner(ct, silentLogger);
    c.cleanup(state([dns(["198.51.100.2"])]));
    await c.idle();
    assert.equal(await metric("kpng_conntrack_cleanup_failures_total"), before + 2);
    c.cleanup(state([dns([])], 2));
    await c.idle();
    assert.equal(ct.batches.length, 1);
  });
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

describe("the conntrack runner", () => {
  test("conntrack runs niced, so that a batch does not take a core from the next sync", async () => {
    // A stand-in conntrack: once its stdin is closed (after kpng has set its priority), it
    // prints one "deleted entry" per step of its nice value.
    const fake = ["sh", "-c", 'read x; for i in $(seq "$(nice)"); do echo entry; done', "conntrack"];
    const runner = new ExecConntrackRunner({ command: fake, timeoutMs: 10_000 });
    assert.equal(await runner.deleteBatch(["-D -p udp --orig-dst 203.0.113.10"]), 10);
  });

  test("the listing is started by the small process, and its lines read back whole, the last without a newline", async () => {
    // $3 is the protocol; the last line has no newline.
    const fake = ["sh", "-c", 'echo "$3 one"; echo "$3 two"; printf "parent $PPID"', "conntrack"];
    const runner = new ExecConntrackRunner({ command: fake, timeoutMs: 10_000 });
    const lines: string[] = [];
    await runner.list("udp", (line) => lines.push(line));
    assert.deepEqual(lines, ["udp one", "udp two", `parent ${sharedSmallSpawner().pid}`]);
    assert.notEqual(sharedSmallSpawner().pid, process.pid);
    const failing = new ExecConntrackRunner({ command: ["sh", "-c", "echo nope >&2; exit 1", "conntrack"] });
    await assert.rejects(
      failing.list("sctp", () => {}),
      /conntrack -L exited 1: nope/,
    );
  });
});
