// Connected UDP sockets to gone endpoints: a sync that removes UDP endpoints from the maps leads
// to one run of the socket iterator with exactly the (frontend, endpoint) pairs that went (a fake
// runner behind the runner interface); TCP endpoints and kept endpoints lead to none. A full sync
// (a restart over the pinned maps, a repair) compares with what the maps held: pairs the new
// state drops are destroyed too. From kpng_rev's entries, only the sockets connected through a
// gone pair are picked. A failed run is logged and counted, and the next one still runs.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EbpfBackend } from "../../../../src/backends/ebpf/backend.ts";
import { MAPS, writeBackend, writeFrontend } from "../../../../src/backends/ebpf/layout.ts";
import { NO_UDP_DESTROY, type ProgramLoader } from "../../../../src/backends/ebpf/programs.ts";
import {
  connectedThrough,
  type DestroyResult,
  destroyResults,
  type GoneFlow,
  goneUdpFlows,
  type SocketDestroyRunner,
  UdpSocketDestroyer,
} from "../../../../src/backends/ebpf/udp-destroy.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { registry } from "../../../../src/observability/metrics.ts";
import { capturingLogger } from "../../../faults/support.ts";
import { FakeBpfMaps } from "../../../support/fake-bpf-maps.ts";
import { ep, port, service, state } from "../nft/fixtures.ts";

class FakeRunner implements SocketDestroyRunner {
  readonly runs: GoneFlow[][] = [];
  fail = 0;
  async run(flows: readonly GoneFlow[]): Promise<DestroyResult> {
    this.runs.push([...flows]);
    if (this.fail > 0) {
      this.fail--;
      throw new Error("bpf iterator: Input/output error");
    }
    return { destroyed: flows.length, failed: 0 };
  }
}

/** A pair as `frontend -> endpoint`, `*` for a node port on any node address. */
const pair = (f: GoneFlow) => {
  const at = (ip: string, port: number) => `${ip.includes(":") ? `[${ip}]` : ip}:${port}`;
  return `${f.address === undefined ? `*:${f.port}` : at(f.address, f.port)} -> ${at(f.endpoint.ip, f.endpoint.port)}`;
};
const pairs = (flows: readonly GoneFlow[]) => flows.map(pair).sort();

const loader: ProgramLoader = {
  ensure: async () => [],
  attach: async () => [],
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
  test("a removed UDP endpoint leads to a destroy run with exactly its pairs", async () => {
    const { runner, sockets, backend } = setup();
    await backend.sync(state([dns()], 1));
    await sockets.idle();
    assert.deepEqual(runner.runs, [], "a full sync over empty maps destroys nothing");
    await backend.sync(state([dns([ep("198.51.100.3", 53)])], 2));
    await sockets.idle();
    assert.equal(runner.runs.length, 1);
    assert.deepEqual(pairs(runner.runs[0]!), [
      "*:30053 -> 198.51.100.2:53",
      "203.0.113.10:53 -> 198.51.100.2:53",
    ]);
  });

  test("a deleted Service's UDP endpoints, IPv4 and IPv6, all go", async () => {
    const { runner, sockets, backend } = setup();
    const dual = dns([ep("198.51.100.2", 53), ep("2001:db8::2", 53)], {
      clusterIPs: ["10.96.0.10", "2001:db8:96::a"],
    });
    await backend.sync(state([dual], 1));
    await backend.sync(state([], 2));
    await sockets.idle();
    assert.deepEqual(pairs(runner.runs.flat()), [
      "*:30053 -> 198.51.100.2:53",
      "*:30053 -> [2001:db8::2]:53",
      "10.96.0.10:53 -> 198.51.100.2:53",
      "[2001:db8:96::a]:53 -> [2001:db8::2]:53",
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
    assert.deepEqual(pairs(runner.runs.at(-1)!), [
      "*:30053 -> 198.51.100.3:53",
      "203.0.113.10:53 -> 198.51.100.3:53",
    ]);
  });

  test("removals while a run is in progress are queued for the next run", async () => {
    const runner = new FakeRunner();
    const sockets = new UdpSocketDestroyer(runner, silentLogger);
    const to = (ip: string): GoneFlow => ({ address: "203.0.113.10", port: 53, endpoint: { ip, port: 53 } });
    sockets.destroy([to("198.51.100.2")]);
    sockets.destroy([to("198.51.100.3")]);
    sockets.destroy([to("198.51.100.3")]);
    await sockets.idle();
    assert.deepEqual(runner.runs, [[to("198.51.100.2")], [to("198.51.100.3")]]);
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
    assert.equal(after.runner.runs.length, 1);
    assert.deepEqual(pairs(after.runner.runs[0]!), [
      "192.0.2.1:30053 -> 198.51.100.2:53",
      "203.0.113.10:53 -> 198.51.100.2:53",
    ]);
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
    assert.deepEqual(pairs(after.runner.runs.flat()), [
      "10.96.0.10:53 -> 198.51.100.2:53",
      "192.0.2.1:30053 -> 198.51.100.2:53",
      "[2001:db8:96::a]:53 -> [2001:db8::2]:53",
    ]);
  });

  test("the pairs of another UDP Service with the same endpoint stay; TCP endpoints are never cut", async () => {
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
    assert.deepEqual(pairs(after.runner.runs.flat()), [
      "192.0.2.1:30053 -> 198.51.100.2:53",
      "192.0.2.1:30053 -> 198.51.100.3:53",
      "203.0.113.10:53 -> 198.51.100.2:53",
      "203.0.113.10:53 -> 198.51.100.3:53",
    ]);
  });

  test("a repair's full sync compares with what the maps still hold", async () => {
    const { runner, sockets, backend } = setup(new FakeBpfMaps());
    await backend.sync(state([dns()], 1));
    for (const f of backend.asFamilies()) f.forget();
    await backend.sync(state([dns([ep("198.51.100.3", 53)])], 2));
    await sockets.idle();
    assert.equal(runner.runs.length, 1);
    assert.deepEqual(pairs(runner.runs[0]!), [
      "192.0.2.1:30053 -> 198.51.100.2:53",
      "203.0.113.10:53 -> 198.51.100.2:53",
    ]);
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

describe("goneUdpFlows", () => {
  const dnsTwoPorts = (eps: ReturnType<typeof dnsEps>) =>
    service({
      name: "dns",
      ports: [
        port({ name: "dns", protocol: "UDP", port: 53, internalEndpoints: eps }),
        port({ name: "dns-alt", protocol: "UDP", port: 5353, internalEndpoints: dnsEps() }),
      ],
    });
  const rows: [string, ReturnType<typeof dns>, ReturnType<typeof dns> | undefined, string[]][] = [
    [
      "an endpoint removed",
      dns(),
      dns([ep("198.51.100.3", 53)]),
      ["*:30053 -> 198.51.100.2:53", "203.0.113.10:53 -> 198.51.100.2:53"],
    ],
    ["nothing removed", dns(), dns(), []],
    [
      "the target port changed",
      dns([ep("198.51.100.2", 53)]),
      dns([ep("198.51.100.2", 5353)]),
      ["*:30053 -> 198.51.100.2:53", "203.0.113.10:53 -> 198.51.100.2:53"],
    ],
    [
      "an endpoint that leaves one UDP port: only that port's pairs, not the other port's",
      dnsTwoPorts(dnsEps()),
      dnsTwoPorts([ep("198.51.100.3", 53)]),
      ["203.0.113.10:53 -> 198.51.100.2:53"],
    ],
    [
      "an IPv6 endpoint is the IPv6 family's",
      dns([ep("2001:db8::2", 53)], { clusterIPs: ["2001:db8::a"] }),
      undefined,
      [],
    ],
  ];
  for (const [name, before, after, want] of rows) {
    test(name, () => {
      assert.deepEqual(pairs(goneUdpFlows(before, after, "IPv4")), want);
    });
  }
});

describe("the sockets connected through a gone pair (kpng_rev: cookie, endpoint -> frontend)", () => {
  /** One kpng_rev entry as connect() records it. */
  const connected = (cookie: number, frontend: string, fport: number, endpoint: string, eport: number) => {
    const key = Buffer.alloc(MAPS.reverse.key);
    key.writeBigUInt64LE(BigInt(cookie), 0);
    const be = Buffer.alloc(MAPS.backends.value);
    writeBackend(be, 0, { ip: endpoint, port: eport });
    be.copy(key, 8, 0, 18);
    const value = Buffer.alloc(MAPS.reverse.value);
    const fe = Buffer.alloc(MAPS.services.key);
    writeFrontend(fe, 0, { ip: frontend, port: fport, protocol: "UDP" });
    fe.copy(value, 0, 0, 18);
    return [key, value] as [Buffer, Buffer];
  };
  const sockets = [
    connected(1, "203.0.113.10", 53, "198.51.100.2", 53),
    connected(2, "203.0.113.11", 53, "198.51.100.2", 53),
    connected(3, "203.0.113.10", 53, "198.51.100.3", 53),
    connected(4, "192.0.2.1", 30053, "198.51.100.2", 53),
    connected(5, "2001:db8:2::10", 53, "2001:db8:1::2", 53),
  ];
  const rows: [string, GoneFlow[], number[]][] = [
    [
      "through the gone frontend to the gone endpoint: cut; through another Service to it: kept",
      [{ address: "203.0.113.10", port: 53, endpoint: { ip: "198.51.100.2", port: 53 } }],
      [1],
    ],
    ["a node port, on any node address", [{ port: 30053, endpoint: { ip: "198.51.100.2", port: 53 } }], [4]],
    [
      "the endpoint's other port is another endpoint",
      [{ address: "203.0.113.10", port: 53, endpoint: { ip: "198.51.100.2", port: 5353 } }],
      [],
    ],
    ["IPv6", [{ address: "2001:db8:2::10", port: 53, endpoint: { ip: "2001:db8:1::2", port: 53 } }], [5]],
  ];
  for (const [name, flows, want] of rows) {
    test(name, () => {
      const got = connectedThrough([sockets], flows).map((c) => Number(c.readBigUInt64LE(0)));
      assert.deepEqual(got, want);
    });
  }
});

describe("the iterator's output", () => {
  test("one line per socket: 0 destroyed, anything else failed", () => {
    assert.deepEqual(destroyResults("0\n0\n-22\n"), { destroyed: 2, failed: 1 });
    assert.deepEqual(destroyResults(""), { destroyed: 0, failed: 0 });
  });
});
