// A brain serving every proxy name over the API (to-api --every-service-proxy-name), with the
// handover's clock faked, and remote backends on node n1 and n2 made of the real client
// (`kpng local --api`'s feed) and a fake sink that reports a sync when the test says so.

import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Set as WireSet } from "../../../src/api/gen/api/localv1/api.ts";
import { toApiPlugin } from "../../../src/api/plugin.ts";
import { proxyNameView } from "../../../src/brain/proxy-name-view.ts";
import { RemoteHandovers } from "../../../src/brain/remote-handovers.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { remoteLocalStateFeed } from "../../../src/client/feed.ts";
import { watchLocal } from "../../../src/client/watch.ts";
import type { LocalState } from "../../../src/model/local.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { capturingLogger } from "../../faults/support.ts";
import { eventually } from "../../support/eventually.ts";
import { FakeClock } from "../../support/fake-clock.ts";
import { ep, slice, svc } from "../brain/fixtures.ts";

const LABEL = "service.kubernetes.io/service-proxy-name";
export const UNCONFIRMED_MS = 4000;
export const FALLBACK_MS = 60_000;

/** A backend of one node and proxy name: what its client received, and a sync report on demand. */
export interface FakeRemoteBackend {
  holds(key: string): boolean;
  /** Reports that the latest state received is programmed (IPv4). */
  sync(): void;
  /** Closes its stream, as a backend that stops or loses its connection. */
  stop(): void;
}

export async function remoteHandoverBrain() {
  const dir = await mkdtemp(join(tmpdir(), "kpng-remote-handover-"));
  const socket = join(dir, "api.sock");
  const clock = new FakeClock();
  const { log, lines } = capturingLogger();
  const store = new ClusterStore({ serviceProxyNames: "any" });
  store.replace("Service", [svc({ name: "web", clusterIP: "198.51.100.1" })]);
  store.replace("EndpointSlice", [slice([ep("192.0.2.1")], { service: "web" })]);
  store.synced();
  const remoteBackends = new RemoteHandovers(store, {
    fallbackMs: FALLBACK_MS,
    unconfirmedMs: UNCONFIRMED_MS,
    log,
    clock,
  });
  const stop = new AbortController();
  const opts = toApiPlugin.parseOptions({ listen: [`unix://${socket}`], everyServiceProxyName: true });
  const running = toApiPlugin.run(proxyNameView(store, ""), opts, {
    signal: stop.signal,
    log,
    serviceProxyName: "",
    remoteBackends,
  });
  await eventually(async () => existsSync(socket), "the API socket");
  const address = `unix://${socket}`;
  const backends: FakeRemoteBackend[] = [];

  /** A backend that reports its syncs, as `kpng local --api … <kernel backend>` runs. */
  const backend = async (serviceProxyName: string, nodeName = "n1"): Promise<FakeRemoteBackend> => {
    const closed = new AbortController();
    const feed = remoteLocalStateFeed({ api: address, nodeName, serviceProxyName, signal: closed.signal });
    let latest: LocalState | undefined;
    feed.subscribe((state) => {
      latest = state;
    });
    await eventually(async () => latest !== undefined, `the first state of ${serviceProxyName}`);
    const b: FakeRemoteBackend = {
      holds: (key) => latest?.services.has(key) ?? false,
      sync: () => feed.programmed?.(latest!, ["IPv4"]),
      stop: () => closed.abort(),
    };
    backends.push(b);
    return b;
  };

  /** A backend whose client predates sync reports: it only watches. */
  const silentBackend = async (serviceProxyName: string): Promise<FakeRemoteBackend> => {
    const closed = new AbortController();
    const keys = new Set<string>();
    let received = false;
    void watchLocal(
      "n1",
      {
        api: address,
        signal: closed.signal,
        onChangeSet: (cs) => {
          received = true;
          for (const op of cs.ops)
            if (op.set === WireSet.ServicesSet) op.op === "set" ? keys.add(op.path) : keys.delete(op.path);
        },
      },
      serviceProxyName,
    );
    await eventually(async () => received, `the first state of ${serviceProxyName}`);
    const b: FakeRemoteBackend = {
      holds: (key) => keys.has(key),
      sync: () => {},
      stop: () => closed.abort(),
    };
    backends.push(b);
    return b;
  };

  /** Relabels "web" to the proxy name (undefined: unlabelled). */
  const relabel = (proxyName: string | undefined) => {
    const labels: Record<string, string> = proxyName === undefined ? {} : { [LABEL]: proxyName };
    store.upsert(svc({ name: "web", clusterIP: "198.51.100.1", labels }));
  };

  /**
   * Backends "" and legacy on n1, the legacy one reporting syncs (unless `silent`), and "web"
   * relabelled to legacy and received by it: the handover has begun, nothing confirmed it yet.
   */
  const beginHandover = async (silent = false) => {
    const plain = await backend("");
    const legacy = silent ? await silentBackend("legacy") : await backend("legacy");
    legacy.sync();
    const fallbacksBefore = await handoverFallbacks();
    relabel("legacy");
    await eventually(async () => legacy.holds("ns/web"), "the gaining backend to receive web");
    return { plain, legacy, fallbacksBefore };
  };

  return {
    clock,
    lines,
    backend,
    relabel,
    beginHandover,
    async close() {
      for (const b of backends) b.stop();
      stop.abort();
      await running;
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function handoverFallbacks(): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === "kpng_handover_fallbacks_total");
  return metric?.values.reduce((n, v) => n + v.value, 0) ?? 0;
}

/** Lets what is on the wire arrive: a fixed real wait, used only to show that nothing happens. */
export const quiet = (ms = 300) => new Promise((r) => setTimeout(r, ms));
