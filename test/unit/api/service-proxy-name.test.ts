// localv1 clients choosing a service proxy name: a brain started with to-api
// --every-service-proxy-name serves each name's Services as an in-process backend of that name
// sees them; a request without the name (as every client before it sends) gets the brain's own.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { toApiPlugin } from "../../../src/api/plugin.ts";
import { proxyNameView } from "../../../src/brain/proxy-name-view.ts";
import { RemoteHandovers } from "../../../src/brain/remote-handovers.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { remoteLocalStateFeed } from "../../../src/client/feed.ts";
import { watchLocal } from "../../../src/client/watch.ts";
import type { LocalState } from "../../../src/model/local.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import type { GlobalSinkContext } from "../../../src/plugin/contracts.ts";
import { eventually } from "../../support/eventually.ts";
import { ep, slice, svc } from "../brain/fixtures.ts";
import { kpngWatch, type RawOp } from "./kpng-client.ts";

const LABEL = "service.kubernetes.io/service-proxy-name";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "kpng-proxy-name-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A brain holding every Service: "web" unlabelled, "old" labelled legacy, "edge" labelled edge. */
function everyServiceStore(): ClusterStore {
  const store = new ClusterStore({ serviceProxyNames: "any" });
  store.replace("Service", [
    svc({ name: "web", clusterIP: "198.51.100.1" }),
    svc({ name: "old", clusterIP: "198.51.100.2", labels: { [LABEL]: "legacy" } }),
    svc({ name: "edge", clusterIP: "198.51.100.3", labels: { [LABEL]: "edge" } }),
  ]);
  store.replace("EndpointSlice", [
    slice([ep("192.0.2.1")], { service: "web" }),
    slice([ep("192.0.2.2")], { service: "old" }),
    slice([ep("192.0.2.3")], { service: "edge" }),
  ]);
  store.synced();
  return store;
}

/** Runs to-api the way `kpng <source> to-api [--every-service-proxy-name]` does; returns its address and a stop. */
function runToApi(store: ClusterStore, every: boolean, socket: string) {
  const stop = new AbortController();
  const opts = toApiPlugin.parseOptions({ listen: [`unix://${socket}`], everyServiceProxyName: every });
  const ctx: GlobalSinkContext = {
    signal: stop.signal,
    log: silentLogger,
    serviceProxyName: "",
    remoteBackends: every
      ? new RemoteHandovers(store, { fallbackMs: 60_000, unconfirmedMs: 4000, log: silentLogger })
      : undefined,
  };
  const running = toApiPlugin.run(every ? proxyNameView(store, "") : store, opts, ctx);
  return {
    address: `unix://${socket}`,
    async stop() {
      stop.abort();
      await running;
    },
  };
}

/** The first local state a `kpng local --api … --service-proxy-name <name>` client receives. */
async function firstState(address: string, serviceProxyName: string | undefined): Promise<LocalState> {
  const stop = new AbortController();
  try {
    return await new Promise<LocalState>((resolve) => {
      remoteLocalStateFeed({ api: address, nodeName: "n1", serviceProxyName, signal: stop.signal }).subscribe(
        resolve,
      );
    });
  } finally {
    stop.abort();
  }
}

const names = (state: LocalState) => [...state.services.values()].map((s) => s.name).sort();
const servicePaths = (ops: RawOp[]) =>
  ops.filter((o) => o.op === "Set" && o.set === "ServicesSet").map((o) => o.path);

test("a client asking for a proxy name gets only the Services labelled with it", async () => {
  const api = runToApi(everyServiceStore(), true, join(dir, "every.sock"));
  await eventually(async () => existsSync(join(dir, "every.sock")), "the API socket");
  try {
    assert.deepEqual(names(await firstState(api.address, "legacy")), ["old"]);
    assert.deepEqual(names(await firstState(api.address, "edge")), ["edge"]);
    assert.deepEqual(names(await firstState(api.address, "")), ["web"]);
    assert.deepEqual(names(await firstState(api.address, "nobody")), []);
  } finally {
    await api.stop();
  }
});

test("a request without the name, as older clients send it, gets the unlabelled Services", async () => {
  const api = runToApi(everyServiceStore(), true, join(dir, "old-client.sock"));
  await eventually(async () => existsSync(join(dir, "old-client.sock")), "the API socket");
  try {
    const [first] = await kpngWatch(api.address, "n1", 1);
    assert.deepEqual(servicePaths(first!), ["ns/web"]);
    assert.deepEqual(names(await firstState(api.address, undefined)), ["web"]);
  } finally {
    await api.stop();
  }
});

test("a brain serving only its own name refuses another with FAILED_PRECONDITION, saying what to do", async () => {
  const store = new ClusterStore({ serviceProxyNames: [""] });
  store.replace("Service", [svc({ name: "web", clusterIP: "198.51.100.1" })]);
  store.synced();
  const api = runToApi(store, false, join(dir, "own.sock"));
  await eventually(async () => existsSync(join(dir, "own.sock")), "the API socket");
  const stop = new AbortController();
  try {
    const refused = await new Promise<Error>((resolve) => {
      void watchLocal(
        "n1",
        { api: api.address, signal: stop.signal, onChangeSet: () => {}, onDisconnect: resolve },
        "legacy",
      );
    });
    assert.match(refused.message, /every-service-proxy-name/);
    assert.deepEqual(names(await firstState(api.address, "")), ["web"]);
  } finally {
    stop.abort();
    await api.stop();
  }
});

test("resume after a reconnect is per proxy name: the delta of that name's Services only", async () => {
  const store = everyServiceStore();
  const api = runToApi(store, true, join(dir, "resume.sock"));
  await eventually(async () => existsSync(join(dir, "resume.sock")), "the API socket");
  try {
    const legacy = { ServiceProxyName: "legacy" };
    const [first] = await kpngWatch(api.address, "n1", 1, legacy);
    assert.deepEqual(servicePaths(first!), ["ns/old"]);
    const { InstanceID, Revision } = first!.at(-1)!.sync as { InstanceID: string; Revision: number };

    store.upsert(svc({ name: "older", clusterIP: "198.51.100.4", labels: { [LABEL]: "legacy" } }));
    store.upsert(svc({ name: "web2", clusterIP: "198.51.100.5" }));
    let resumed: RawOp[] = [];
    await eventually(async () => {
      [resumed = []] = await kpngWatch(api.address, "n1", 1, { ...legacy, InstanceID, Revision });
      return servicePaths(resumed).length > 0;
    }, "the new legacy Service");
    assert.equal(resumed[0]!.op, "Set", "a delta, no Reset");
    assert.deepEqual(servicePaths(resumed), ["ns/older"]);

    // The revision is legacy's: for the unlabelled Services it means nothing, so they come whole.
    const [other] = await kpngWatch(api.address, "n1", 1, { ServiceProxyName: "", InstanceID, Revision });
    assert.equal(other![0]!.op, "Reset");
    assert.deepEqual(servicePaths(other!).sort(), ["ns/web", "ns/web2"]);
  } finally {
    await api.stop();
  }
});
