// Connected UDP sockets to gone endpoints: a sync that removes UDP endpoints from the maps leads
// to one run of the socket iterator with exactly those endpoints (a fake runner behind the
// runner interface); TCP endpoints and kept endpoints lead to none. A full sync (a restart over
// the pinned maps, a repair) compares with what the maps held: endpoints the new state drops
// are destroyed too. A failed run is logged and counted, and the next one still runs.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EbpfBackend } from "../../../../src/backends/ebpf/backend.ts";
import type { Backend } from "../../../../src/backends/ebpf/layout.ts";
import { NO_UDP_DESTROY, type ProgramLoader } from "../../../../src/backends/ebpf/programs.ts";
import {
  type DestroyResult,
  destroyResults,
  goneUdpPeers,
  type SocketDestroyRunner,
  UdpSocketDestroyer,
} from "../../../../src/backends/ebpf/udp-destroy.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { registry } from "../../../../src/observability/metrics.ts";
import { capturingLogger } from "../../../faults/support.ts";
import { FakeBpfMaps } from "../../../support/fake-bpf-maps.ts";
import { ep, port, service, state } from "../nft/fixtures.ts";

class FakeRunner implements SocketDestroyRunner {
  readonly runs: Backend[][] = [];
  fail = 0;
  async run(endpoints: readonly Backend[]): Promise<DestroyResult> {
    this.runs.push([...endpoints]);
    if (this.fail > 0) {
      this.fail--;
      throw new Error("bpf iterator: Input/output error");
    }
    return { destroyed: endpoints.length, failed: 0 };
  }
}

const loader: ProgramLoader = {
  ensure: async () => [],
  check: async () => [],
  remove: async () => [],
};

/** One kpng process: its own runner and backend, over `maps` (fresh ones unless given). */
function setup(maps?: FakeBpfMaps) {
  const runner = new FakeRunner();
  const sockets = new UdpSocketDestroyer(runner, silentLogger);
  const backend = new EbpfBackend({
    loader,
    openMaps: () => maps ?? new FakeBpfMaps(),
    render: { nodePortIPs: { IPv4: ["192.0.2.1"], IPv6: [] } },
    log: silentLogger,
    udpSockets: sockets,
  });
  return { runner, sockets, backend };
}

const dns = (eps = [ep("198.51.100.2", 53), ep("198.51.100.3", 53)], over = {}) =>
  service({
    name: "dns",
    ports: [port({ name: "dns", protocol: "UDP", port: 53, nodePort: 30053, internalEndpoints: eps })],
    ...over,
  });

const metric = async (name: string) =>
  ((await registry.getSingleMetric(name)?.get())?.values ?? []).reduce((n, v) => n + v.value, 0);

describe("connected UDP sockets to gone endpoints", () => {
  test("a removed UDP endpoint leads to a destroy run with exactly that endpoint", async () => {
    const { runner, sockets, backend } = setup();
    await backend.sync(state([dns()], 1));
    await sockets.idle();
    assert.deepEqual(runner.runs, [], "a full sync over empty maps destroys nothing");
    await backend.sync(state([dns([ep("198.51.100.3", 53)])], 2));
    await sockets.idle();
    assert.deepEqual(runner.runs, [[{ ip: "198.51.100.2", port: 53 }]]);
  });

  test("a deleted Service's UDP endpoints, IPv4 and IPv6, all go", async () => {
    const { runner, sockets, backend } = setup();
    const dual = dns([ep("198.51.100.2", 53), ep("2001:db8::2", 53)], {
      clusterIPs: ["10.96.0.10", "2001:db8:96::a"],
    });
    await backend.sync(state([dual], 1));
    await backend.sync(state([], 2));
    await sockets.idle();
    const all = runner.runs.flat().sort((a, b) => a.ip.localeCompare(b.ip));
    assert.deepEqual(all, [
      { ip: "198.51.100.2", port: 53 },
      { ip: "2001:db8::2", port: 53 },
    ]);
  });

  test("TCP endpoints, kept endpoints and new endpoints lead to no run", async () => {
    const { runner, sockets, backend } = setup();
    const web = service({ name: "web" });
    await backend.sync(state([web, dns()], 1));
    await backend.sync(
      state(
        [
          service({ name: "web", ports: [port({ internalEndpoints: [] })] }),
          dns([...dnsEps(), ep("198.51.100.4", 53)]),
        ],
        2,
      ),
    );
    await sockets.idle();
    assert.deepEqual(runner.runs, []);
  });

  test("a failed run is counted; the next removal still runs", async () => {
    const { runner, sockets, backend } = setup();
    const before = await metric("kpng_ebpf_udp_socket_destroy_failures_total");
    runner.fail = 1;
    await backend.sync(state([dns()], 1));
    await backend.sync(state([dns([ep("198.51.100.3", 53)])], 2));
    await sockets.idle();
    assert.equal(await metric("kpng_ebpf_udp_socket_destroy_failures_total"), before + 1);
    await backend.sync(state([dns([])], 3));
    await sockets.idle();
    assert.deepEqual(runner.runs.at(-1), [{ ip: "198.51.100.3", port: 53 }]);
  });

  test("removals while a run is in progress are queued for the next run", async () => {
    const runner = new FakeRunner();
    const sockets = new UdpSocketDestroyer(runner, silentLogger);
    sockets.destroy([{ ip: "198.51.100.2", port: 53 }]);
    sockets.destroy([{ ip: "198.51.100.3", port: 53 }]);
    sockets.destroy([{ ip: "198.51.100.3", port: 53 }]);
    await sockets.idle();
    assert.deepEqual(runner.runs, [[{ ip: "198.51.100.2", port: 53 }], [{ ip: "198.51.100.3", port: 53 }]]);
  });
});

describe("a full sync over the maps of the run before", () => {
  test("a restart destroys the UDP endpoints that left while kpng was down", async () => {
    const maps = new FakeBpfMaps();
    const before = setup(maps);
    await before.backend.sync(state([dns()], 1));
    await before.sockets.idle();
    const after = setup(maps);
    await after.backend.sync(state([dns([ep("198.51.100.3", 53)])], 1));
    await after.sockets.idle();
    assert.deepEqual(before.runner.runs, []);
    assert.deepEqual(after.runner.runs, [[{ ip: "198.51.100.2", port: 53 }]]);
  });

  test("a restart with nothing changed destroys nothing", async () => {
    const maps = new FakeBpfMaps();
    await setup(maps).backend.sync(state([dns()], 1));
    const after = setup(maps);
    await after.backend.sync(state([dns()], 1));
    await after.sockets.idle();
    assert.deepEqual(after.runner.runs, []);
  });

  test("a restart after the Service was deleted destroys its endpoints of both families", async () => {
    const maps = new FakeBpfMaps();
    const dual = dns([ep("198.51.100.2", 53), ep("2001:db8::2", 53)], {
      clusterIPs: ["10.96.0.10", "2001:db8:96::a"],
    });
    await setup(maps).backend.sync(state([dual, service({ name: "web" })], 1));
    const after = setup(maps);
    await after.backend.sync(state([service({ name: "web" })], 1));
    await after.sockets.idle();
    const all = after.runner.runs.flat().sort((a, b) => a.ip.localeCompare(b.ip));
    assert.deepEqual(all, [
      { ip: "198.51.100.2", port: 53 },
      { ip: "2001:db8::2", port: 53 },
    ]);
  });

  test("an endpoint another UDP Service still balances to stays; TCP endpoints are never cut", async () => {
    const maps = new FakeBpfMaps();
    const other = service({
      name: "other",
      clusterIPs: ["10.96.0.11"],
      ports: [port({ name: "dns", protocol: "UDP", port: 53, internalEndpoints: [ep("198.51.100.2", 53)] })],
    });
    const web = service({ name: "web", ports: [port({ internalEndpoints: [ep("198.51.100.9", 80)] })] });
    await setup(maps).backend.sync(state([dns(), other, web], 1));
    const after = setup(maps);
    await after.backend.sync(state([dns([]), other], 1));
    await after.sockets.idle();
    assert.deepEqual(after.runner.runs, [[{ ip: "198.51.100.3", port: 53 }]]);
  });

  test("a repair's full sync compares with what the maps still hold", async () => {
    const { runner, sockets, backend } = setup(new FakeBpfMaps());
    await backend.sync(state([dns()], 1));
    for (const f of backend.asFamilies()) f.forget();
    await backend.sync(state([dns([ep("198.51.100.3", 53)])], 2));
    await sockets.idle();
    assert.deepEqual(runner.runs, [[{ ip: "198.51.100.2", port: 53 }]]);
  });
});

function dnsEps() {
  return [ep("198.51.100.2", 53), ep("198.51.100.3", 53)];
}

describe("a kernel without bpf_sock_destroy", () => {
  test("the balancing maps are written and the missing iterator is logged once, as a warning", async () => {
    const { log, lines } = capturingLogger();
    let ensured = 0;
    const backend = new EbpfBackend({
      loader: {
        ...loader,
        ensureUdpDestroy: async () =>
          ensured++ === 0 ? [`${NO_UDP_DESTROY}: bpf_sock_destroy not found`] : [],
      },
      openMaps: () => new FakeBpfMaps(),
      render: { nodePortIPs: { IPv4: [], IPv6: [] } },
      log,
    });
    const report = await backend.sync(state([dns()], 1));
    assert.ok(report.frontendsWritten > 0);
    await backend.iteratorSettled();
    for (const a of backend.asFamilies()) a.forget();
    await backend.sync(state([dns()], 2));
    await backend.iteratorSettled();
    const warned = lines.filter((l) => String(l.msg).startsWith("connected UDP sockets keep an endpoint"));
    assert.equal(warned.length, 1);
    assert.equal(warned[0]?.level, 40);
  });
});

describe("goneUdpPeers", () => {
  const dnsTwoPorts = (eps: ReturnType<typeof dnsEps>) =>
    service({
      name: "dns",
      ports: [
        port({ name: "dns", protocol: "UDP", port: 53, internalEndpoints: eps }),
        port({ name: "dns-alt", protocol: "UDP", port: 5353, internalEndpoints: dnsEps() }),
      ],
    });
  const rows: [string, ReturnType<typeof dns>, ReturnType<typeof dns> | undefined, string[]][] = [
    ["an endpoint removed", dns(), dns([ep("198.51.100.3", 53)]), ["198.51.100.2:53"]],
    ["the Service deleted", dns(), undefined, ["198.51.100.2:53", "198.51.100.3:53"]],
    ["nothing removed", dns(), dns(), []],
    [
      "the target port changed",
      dns(),
      dns(dnsEps().map((e) => ({ ...e, port: 5353 }))),
      ["198.51.100.2:53", "198.51.100.3:53"],
    ],
    [
      "an endpoint that leaves one UDP port but serves another of the Service stays (matched by peer)",
      dnsTwoPorts(dnsEps()),
      dnsTwoPorts([ep("198.51.100.3", 53)]),
      [],
    ],
    ["an IPv6 endpoint is the IPv6 family's", dns([ep("2001:db8::2", 53)]), undefined, []],
  ];
  for (const [name, before, after, want] of rows) {
    test(name, () => {
      const gone = goneUdpPeers(before, after, "IPv4");
      assert.deepEqual(
        gone.map((b) => `${b.ip}:${b.port}`),
        want,
      );
    });
  }
});

describe("the iterator's output", () => {
  test("one line per socket: 0 destroyed, anything else failed", () => {
    assert.deepEqual(destroyResults("0\n0\n-22\n"), { destroyed: 2, failed: 1 });
    assert.deepEqual(destroyResults(""), { destroyed: 0, failed: 0 });
  });
});
