// A full BPF map, in the kernel: kpng runs to-ebpf with the smallest backend map the flag allows
// and more endpoints than fit. The failed write is logged naming the flag, counted in
// kpng_ebpf_map_full_total, and /healthz turns unhealthy; no frontend names a half-written list.
// Then the cluster shrinks and everything recovers. The sync metrics follow each IP family on its
// own: the IPv4 maps fail while IPv6 (nothing to write) keeps syncing.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { eventually } from "../../support/eventually.ts";
import {
  type BpfMounts,
  ebpfSkipReason,
  mountBpf,
  type Spawned,
  suiteTopology,
} from "../../support/netns.ts";
import { type TestService, writeCluster } from "../contract/cluster.ts";
import { httpGet } from "../node/http-get.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await ebpfSkipReason();

/** The value of `name`'s eBPF series for one ip_family in a scrape; undefined when absent. */
function ebpfSeries(scrape: string, name: string, family: string): number | undefined {
  for (const line of scrape.split("\n")) {
    if (!line.startsWith(`${name}{`) || !line.includes('backend="ebpf"')) continue;
    if (line.includes(`ip_family="${family}"`)) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

/** n Services with 10 (unreachable, TEST-NET) endpoints each: two backend map entries each. */
function services(n: number): TestService[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `s${i}`,
    clusterIP: `203.0.113.${i + 1}`,
    ports: [{ name: "http", port: 80, targetPort: 8080 }],
    endpoints: Array.from({ length: 10 }, (_, e) => ({ ip: `198.51.100.${e + 10}`, node: "node-1" })),
  }));
}

describe("eBPF backend with a full map", { skip }, () => {
  const env = suiteTopology();
  const dir = mkdtempSync(join(tmpdir(), "kpng-ebpf-full-"));
  const file = join(dir, "cluster.yaml");
  let mounts: BpfMounts;
  let kpng: Spawned | undefined;
  let flags: string[];
  const get = (path: string) => httpGet(env.topology.node, `http://127.0.0.1${path}`);

  before(async () => {
    mounts = await mountBpf();
    flags = ["--bpf-root", mounts.bpfRoot, "--cgroup-root", mounts.clients];
    // 150 Services of two entries each: 300; the map holds 256.
    writeCluster(file, services(150));
    kpng = env.topology.node.spawn(
      [
        process.execPath,
        MAIN,
        "file",
        "--input",
        file,
        "to-local",
        "to-ebpf",
        ...flags,
        "--bpf-map-backends",
        "256",
        "--node-name",
        "node-1",
        "--sync-period",
        "1s",
        "--min-sync-period",
        "100ms",
        "--healthz-bind-address",
        "127.0.0.1:10256",
        "--metrics-bind-address",
        "127.0.0.1:10249",
      ],
      { name: "kpng" },
    );
  });

  after(async () => {
    await kpng?.stop();
    await env.topology.node.exec([process.execPath, MAIN, "cleanup", "ebpf", ...flags], {
      allowFailure: true,
    });
    await mounts?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the failure is logged naming the flag, counted, and /healthz is unhealthy", async () => {
    await eventually(
      async () => /a BPF map is full: raise its --bpf-map-\*/.test(kpng?.stderr() ?? ""),
      "the log line",
      60_000,
    );
    await eventually(
      async () => /kpng_ebpf_map_full_total\{map="backends"\} [1-9]/.test((await get(":10249/metrics")).body),
      "the metric",
      30_000,
    );
    await eventually(async () => (await get(":10256/healthz")).status === 503, "/healthz 503", 30_000);
    const scrape = (await get(":10249/metrics")).body;
    assert.ok((ebpfSeries(scrape, "kpng_ebpf_sync_failures_total", "IPv4") ?? 0) >= 1, "IPv4 failures");
    assert.equal(ebpfSeries(scrape, "kpng_ebpf_sync_failures_total", "IPv6"), 0);
    assert.ok(
      (ebpfSeries(scrape, "kubeproxy_sync_proxy_rules_duration_seconds_count", "IPv6") ?? 0) >= 1,
      "IPv6 synced on its own",
    );
  });

  test("once the Services fit, the maps are written and /healthz is healthy again", async () => {
    writeCluster(file, services(50));
    // A new state is queued at once, so /healthz may turn 200 (a sync pending, not yet overdue, as
    // kube-proxy counts it) before the maps are written: wait for both.
    const list = async () =>
      JSON.parse(
        (
          await env.topology.node.exec([
            process.execPath,
            MAIN,
            "ebpf",
            "list",
            "-o",
            "json",
            "--bpf-root",
            mounts.bpfRoot,
          ])
        ).stdout,
      ) as { backends: string[] }[];
    let listed: { backends: string[] }[] = [];
    await eventually(
      async () => {
        if ((await get(":10256/healthz")).status !== 200) return false;
        listed = await list();
        return listed.length === 50;
      },
      "/healthz 200 and the maps written",
      60_000,
    );
    assert.equal(listed.length, 50);
    assert.ok(listed.every((f) => f.backends.length === 10));
    const scrape = (await get(":10249/metrics")).body;
    for (const family of ["IPv4", "IPv6"]) {
      const synced = ebpfSeries(scrape, "kubeproxy_sync_proxy_rules_duration_seconds_count", family);
      assert.ok((synced ?? 0) >= 1, `${family} syncs timed`);
      assert.ok((ebpfSeries(scrape, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", family) ?? 0) > 0);
    }
    assert.equal(ebpfSeries(scrape, "kubeproxy_sync_proxy_rules_duration_seconds_count", ""), undefined);
  });
});
