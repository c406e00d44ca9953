// The per-Service backend tests' shared part: the Services (web, unlabelled at first, and old,
// labelled legacy), who holds an address (nft's service map, the labelled backend's kernel
// state), and the moves of web between the two backends by relabelling, with connections opened
// all along and the holders sampled until only the gaining backend holds it.

import assert from "node:assert/strict";
import type { TestContext } from "node:test";
import { outcome, type ProbeResult, probeFrom, tcp } from "../../support/client.ts";
import type { Topology } from "../../support/netns.ts";
import { type TestService, writeCluster } from "./cluster.ts";
import type { LabelledBackend } from "./two-backends.ts";

export const WEB = "203.0.113.10";
export const OLD = "203.0.113.11";
/** One sync of the losing backend: its --min-sync-period (100 ms) and a few Services' sync under load. */
const ONE_SYNC_MS = 100 + 1900;

const http = [{ name: "http", port: 80, targetPort: 8080 }];

/** The pods the Services need: web-1 on node-1, web-2 on node-2, both echoing on 8080. */
export const PODS = [
  { name: "web-1", echo: { tcpPorts: [8080] } },
  { name: "web-2", echo: { tcpPorts: [8080] } },
];

export function services(topo: Topology, webProxyName: string | undefined): TestService[] {
  const ip = (pod: string) => topo.pod(pod).ipv4 ?? "";
  return [
    {
      name: "web",
      clusterIP: WEB,
      ports: http,
      endpoints: [
        { ip: ip("web-1"), node: "node-1" },
        { ip: ip("web-2"), node: "node-2" },
      ],
      ...(webProxyName === undefined ? {} : { proxyName: webProxyName }),
    },
    {
      name: "old",
      type: "NodePort",
      clusterIP: OLD,
      ports: [{ ...http[0]!, nodePort: 30080 }],
      endpoints: [{ ip: ip("web-2"), node: "node-2" }],
      proxyName: "legacy",
    },
  ];
}

/** A connection from the client pod, inside the labelled backend's cgroup if it has one. */
export async function probe(
  topo: Topology,
  labelled: LabelledBackend,
  host: string,
  port: number,
  timeoutMs = 1000,
): Promise<ProbeResult> {
  const [r] = await probeFrom(topo.client.ns, [tcp(host, port, timeoutMs)], { cgroup: labelled.cgroup() });
  return r!;
}

/**
 * Whether each backend holds the address: nft in its table's service map, the other in its own
 * state. The two reads are not one instant: during a move the losing backend is read first, so
 * that a gainer that takes the address between the reads is not taken for "held by neither".
 */
export async function holders(
  topo: Topology,
  labelled: LabelledBackend,
  ip: string,
  gainer: "nft" | "labelled" = "nft",
): Promise<{ nft: boolean; labelled: boolean }> {
  const nft = async () => (await topo.node.exec(["nft", "list", "table", "ip", "kpng"])).stdout.includes(ip);
  const other = () => labelled.holds(topo.node, ip);
  if (gainer === "nft") {
    const held = await other();
    return { nft: await nft(), labelled: held };
  }
  const held = await nft();
  return { nft: held, labelled: await other() };
}

/**
 * Moves web to the labelled backend (labelled legacy) and back to nft while clients keep
 * connecting, and checks the handover: no connection fails, the Service is never held by neither
 * backend, and by both only for one sync of the loser.
 */
export async function checkRelabelMoves(
  t: TestContext,
  topo: Topology,
  labelled: LabelledBackend,
  file: string,
): Promise<void> {
  const results: { at: number; r: ProbeResult }[] = [];
  let moving = true;
  const traffic = (async () => {
    while (moving) {
      const batch = await probeFrom(
        topo.client.ns,
        Array.from({ length: 10 }, () => tcp(WEB, 80, 1000)),
        { concurrency: 2, cgroup: labelled.cgroup() },
      );
      const at = Date.now();
      for (const r of batch) results.push({ at, r });
    }
  })();
  const moves: number[] = [];
  /** Per move: how long both backends held the Service, and how often neither did. */
  const windows: { to: string; bothMs: number; neither: number; samples: number }[] = [];
  const move = async (proxyName: string | undefined, to: "nft" | "labelled") => {
    await new Promise((r) => setTimeout(r, 1000));
    moves.push(Date.now());
    writeCluster(file, services(topo, proxyName));
    // Sample who holds it until only the gaining backend does.
    let bothSince: number | undefined;
    let bothMs = 0;
    let neither = 0;
    let samples = 0;
    const deadline = Date.now() + 30_000;
    for (;;) {
      const h = await holders(topo, labelled, WEB, to);
      const at = Date.now();
      samples++;
      if (h.nft && h.labelled) bothSince ??= at;
      if (!h.nft && !h.labelled) neither++;
      const moved = to === "labelled" ? h.labelled && !h.nft : h.nft && !h.labelled;
      if (moved) {
        if (bothSince !== undefined) bothMs = at - bothSince;
        break;
      }
      assert.ok(at < deadline, `web to move to ${to === "nft" ? "nft" : labelled.name}`);
    }
    windows.push({ to: to === "nft" ? "nft" : labelled.name, bothMs, neither, samples });
  };
  try {
    await move("legacy", "labelled");
    await move(undefined, "nft");
    await new Promise((r) => setTimeout(r, 1000));
  } finally {
    moving = false;
    await traffic;
  }
  assert.ok(results.length >= 20, `only ${results.length} connections during the moves`);
  const failed = results
    .filter(({ r }) => !r.ok)
    .map(({ at, r }) => `${outcome(r)} at +${at - (moves[0] ?? 0)} ms`);
  assert.deepEqual(
    failed,
    [],
    `connections failed during the moves (moves at +0 and +${(moves[1] ?? 0) - (moves[0] ?? 0)} ms)`,
  );
  assert.ok((await probe(topo, labelled, WEB, 80)).ok);
  // Exactly one backend holds it afterwards, as each backend's own listing shows.
  assert.deepEqual(
    (await labelled.listing(topo.node)).filter((l) => l.includes(WEB)),
    [],
    `${labelled.name} still lists ${WEB}`,
  );
  assert.ok((await holders(topo, labelled, WEB)).nft, `nft lists ${WEB}`);
  // The handover: the loser drops the Service once the gainer's sync holds it, so neither is
  // never seen, and both only until the loser's next sync: one --min-sync-period (100 ms) and
  // the sync itself, allowed ONE_SYNC_MS on this loaded machine.
  t.diagnostic(`handover windows: ${JSON.stringify(windows)}`);
  for (const w of windows) {
    assert.equal(
      w.neither,
      0,
      `moving to ${w.to}: held by neither backend in ${w.neither}/${w.samples} samples`,
    );
    assert.ok(
      w.bothMs <= ONE_SYNC_MS,
      `moving to ${w.to}: held by both for ${w.bothMs} ms (> ${ONE_SYNC_MS} ms)`,
    );
  }
}
