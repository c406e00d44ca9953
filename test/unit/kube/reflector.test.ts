// The reflector against the test API server: every way a watch can end, and what the sink sees.

import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, it } from "node:test";
import { Reflector, type ReflectorTimings } from "../../../src/kube/reflector.ts";
import type { ApiResponse, KubeTransport } from "../../../src/kube/transport.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { resourceSpecs } from "../../../src/sources/kube/source.ts";
import { node, service } from "../../apiserver/fixtures.ts";
import { TestApiServer } from "../../apiserver/server.ts";
import { HookedTransport, RecordingSink, transportTo, waitFor } from "../sources/kube/helpers.ts";

const FAST: Partial<ReflectorTimings> = {
  pageSize: 500,
  minWatchTimeoutSeconds: 300,
  inactivityTimeoutMs: 300,
  minHealthyWatchMs: 50,
  backoff: { initialMs: 20, maxMs: 200, jitter: 0 },
};

const [SERVICES, , NODES] = resourceSpecs({ nodeName: "node-1" });

describe("reflector", () => {
  let api: TestApiServer;
  let sink: RecordingSink;
  const reflectors: Reflector[] = [];

  function startReflector(
    options: { timings?: Partial<ReflectorTimings>; transport?: KubeTransport; spec?: typeof SERVICES } = {},
  ): Reflector {
    const reflector = new Reflector(options.spec ?? SERVICES!, sink, {
      transport: options.transport ?? transportTo(api.url),
      log: silentLogger,
      timings: { ...FAST, ...options.timings },
      random: () => 0,
    });
    reflectors.push(reflector);
    reflector.start();
    return reflector;
  }

  const serviceWatches = () => api.requests.filter((r) => r.resource === "services" && r.watch);
  const serviceLists = () => api.requests.filter((r) => r.resource === "services" && !r.watch);

  beforeEach(async () => {
    api = await TestApiServer.start({ bookmarkIntervalMs: 0 });
    sink = new RecordingSink();
  });

  afterEach(async () => {
    await Promise.all(reflectors.splice(0).map((r) => r.stop()));
    await api.close();
  });

  it("lists in pages of pageSize into one replace, then watches from the list's resourceVersion", async () => {
    for (const n of ["a", "b", "c", "d", "e"]) api.create(service(n));
    const listRv = String(api.store.currentRv);
    // A page slower than the short inactivity timeout (a loaded machine) would restart the list.
    const reflector = startReflector({ timings: { pageSize: 2, inactivityTimeoutMs: 30_000 } });
    await reflector.listed;
    assert.deepEqual(sink.calls, ["replace Service [default/a,default/b,default/c,default/d,default/e]"]);
    assert.deepEqual(
      serviceLists().map((r) => [r.query.get("limit"), r.query.has("continue")]),
      [
        ["2", false],
        ["2", true],
        ["2", true],
      ],
    );
    await waitFor("a watch", () => serviceWatches().length === 1);
    const watch = serviceWatches()[0]!.query;
    assert.equal(watch.get("resourceVersion"), listRv);
    assert.equal(watch.get("allowWatchBookmarks"), "true");
    assert.equal(watch.get("labelSelector"), "!service.kubernetes.io/service-proxy-name");
    assert.equal(watch.get("timeoutSeconds"), "300");
  });

  it("hands each list page to a sink that takes pages before asking for the next", async () => {
    for (const n of ["a", "b", "c", "d", "e"]) api.create(service(n));
    const pages: string[][] = [];
    let commits = 0;
    sink.startList = () => ({
      add: (objects) => pages.push(objects.map((o) => o.metadata.name)),
      commit: () => commits++,
    });
    const inSinkAtRequest: number[] = [];
    const transport = new HookedTransport(transportTo(api.url), (path) => {
      if (path.startsWith("/api/v1/services?") && !path.includes("watch="))
        inSinkAtRequest.push(pages.flat().length);
    });
    const reflector = startReflector({ transport, timings: { pageSize: 2, inactivityTimeoutMs: 30_000 } });
    await reflector.listed;
    assert.deepEqual(pages, [["a", "b"], ["c", "d"], ["e"]]);
    assert.deepEqual(inSinkAtRequest, [0, 2, 4]);
    assert.equal(commits, 1);
    assert.deepEqual(sink.calls, [], "no replace: the pages were the list");
  });

  it("asks for a random watch timeout between min and 2×min seconds", async () => {
    const reflector = new Reflector(SERVICES!, sink, {
      transport: transportTo(api.url),
      log: silentLogger,
      timings: FAST,
      random: () => 0.999,
    });
    reflectors.push(reflector);
    reflector.start();
    await waitFor("a watch", () => serviceWatches().length === 1);
    assert.equal(serviceWatches()[0]!.query.get("timeoutSeconds"), "599");
  });

  it("delivers ADDED, MODIFIED and DELETED as upsert and delete", async () => {
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    api.create(service("web"));
    api.update(service("web", { port: 81 }));
    api.delete("Service", "default/web");
    await waitFor("the delete", () => sink.calls.includes("delete Service default/web"));
    assert.deepEqual(sink.calls, [
      "replace Service []",
      "upsert Service default/web",
      "upsert Service default/web",
      "delete Service default/web",
    ]);
  });

  it("resumes from the last event's resourceVersion after the server closes the watch, without a relist", async () => {
    const reflector = startReflector({ timings: { minWatchTimeoutSeconds: 1, inactivityTimeoutMs: 5000 } });
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    const { metadata } = api.create(service("before-close"));
    await waitFor("the second watch", () => serviceWatches().length === 2, 4000);
    assert.equal(serviceWatches()[1]!.query.get("resourceVersion"), metadata.resourceVersion);
    api.create(service("after-close"));
    await waitFor("the object created after the close", () => sink.has("Service", "default/after-close"));
    assert.equal(serviceLists().length, 1);
  });

  it("resumes from a bookmark's resourceVersion, newer than any event it saw", async () => {
    await api.close();
    api = await TestApiServer.start({ bookmarkIntervalMs: 30 });
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    api.create(node("elsewhere"));
    const bumped = String(api.store.currentRv);
    await waitFor("the bookmark", () => reflector.resourceVersion === bumped);
    api.dropConnections();
    await waitFor("a second watch", () => serviceWatches().length === 2);
    assert.equal(serviceWatches()[1]!.query.get("resourceVersion"), bumped);
    assert.equal(serviceLists().length, 1);
  });

  it("relists after an in-stream 410 and deletes what vanished meanwhile", async () => {
    api.create(service("kept"));
    api.create(service("vanishing"));
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    // Down while the delete happens and history is compacted past our resourceVersion.
    await api.stop();
    api.delete("Service", "default/vanishing");
    api.compact();
    await api.listen();
    const recovered = await waitFor("the delete", () => !sink.has("Service", "default/vanishing"));
    assert.deepEqual(sink.names("Service"), ["default/kept"]);
    assert.equal(serviceLists().length, 2);
    assert.ok(sink.calls.at(-1)!.startsWith("replace Service [default/kept]"), sink.calls.join("\n"));
    process.stdout.write(`# 410 after reconnect recovered in ${recovered} ms\n`);
  });

  it("relists when a connected watch gets ERROR 410 (a watcher that fell out of the window)", async () => {
    api.create(service("x"));
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    api.expireWatches();
    await waitFor("a relist", () => serviceLists().length === 2);
    await waitFor("a new watch", () => api.watchCount === 1);
    api.create(service("y"));
    await waitFor("y", () => sink.has("Service", "default/y"));
  });

  it("relists after an HTTP 410 on the watch request", async () => {
    await api.close();
    api = await TestApiServer.start({ bookmarkIntervalMs: 0, expiredWatchAs: "status" });
    api.create(service("gone"));
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    await api.stop();
    api.delete("Service", "default/gone");
    api.compact();
    await api.listen();
    await waitFor("the relist", () => serviceLists().length === 2);
    await waitFor("the delete", () => !sink.has("Service", "default/gone"));
  });

  it("relists when a replaced API server has not reached our resourceVersion (504 too large)", async () => {
    for (const n of ["a", "b", "c"]) api.create(service(n));
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    // A new server with a fresh store (lower revisions) on the same port.
    const port = api.port;
    await api.close();
    api = await TestApiServer.start({ port, bookmarkIntervalMs: 0 });
    api.create(service("z"));
    await waitFor("the relist", () => sink.names("Service").join() === "default/z");
    assert.ok(
      api.requests.some((r) => r.watch && Number(r.query.get("resourceVersion")) > api.store.currentRv),
    );
  });

  it("restarts the list from the first page when a continue token expires", async () => {
    for (const n of ["a", "b", "c"]) api.create(service(n));
    let compactions = 0;
    const transport = new HookedTransport(transportTo(api.url), (path) => {
      if (path.includes("continue=") && compactions === 0) {
        compactions++;
        api.delete("Service", "default/c");
        api.compact();
      }
    });
    const reflector = startReflector({ transport, timings: { pageSize: 1 } });
    await reflector.listed;
    const lists = serviceLists().map((r) => (r.query.has("continue") ? "next" : "first"));
    assert.deepEqual(lists, ["first", "next", "first", "next"]);
    assert.deepEqual(sink.calls, ["replace Service [default/a,default/b]"]);
  });

  it("reconnects a silent watch after the inactivity timeout", async () => {
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    api.silence();
    const silencedAt = Date.now();
    await waitFor("a new watch after the inactivity timeout", () => serviceWatches().length >= 2);
    api.silence(false);
    api.create(service("after-silence"));
    await waitFor("the object after the silence", () => sink.has("Service", "default/after-silence"));
    const recovered = Date.now() - silencedAt;
    assert.ok(serviceWatches().length >= 2);
    assert.equal(serviceLists().length, 1);
    process.stdout.write(
      `# silent until the watch was reopened (inactivity timeout 300 ms): event delivered after ${recovered} ms\n`,
    );
  });

  it("retries 500s with exponential backoff and never gives up", async () => {
    api.fail(500, 5);
    const reflector = startReflector();
    await reflector.listed;
    const times = serviceLists().map((r) => r.at);
    assert.equal(times.length, 6);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    // jitter 0: 20, 40, 80, 160, then the 200 ms cap.
    const expected = [20, 40, 80, 160, 200];
    for (const [i, gap] of gaps.entries()) {
      assert.ok(gap >= expected[i]! - 2, `gap ${i} was ${gap} ms, expected ≥ ${expected[i]}`);
    }
  });

  it("keeps serving the last state while the API server is down, and catches up after", async () => {
    api.create(service("steady"));
    let attempts = 0;
    const transport = new HookedTransport(transportTo(api.url), () => attempts++);
    const reflector = startReflector({ transport });
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    await api.stop();
    const callsWhileDown = sink.calls.length;
    const attemptsBefore = attempts;
    await waitFor("two failed attempts while down", () => attempts >= attemptsBefore + 2);
    assert.equal(sink.calls.length, callsWhileDown);
    assert.deepEqual(sink.names("Service"), ["default/steady"]);
    api.create(service("while-down"));
    await api.listen();
    await waitFor("the object created while down", () => sink.has("Service", "default/while-down"));
    assert.equal(serviceLists().length, 1, "history still covers us: no relist needed");
  });

  it("logs a sink exception and goes on with the next events", async () => {
    sink.throwOnName = "boom";
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    api.create(service("boom"));
    api.create(service("after-boom"));
    await waitFor("the next object", () => sink.has("Service", "default/after-boom"));
    assert.ok(sink.calls.includes("upsert Service default/boom"));
  });

  it("treats a service that gains the service-proxy-name label as deleted, and back when it loses it", async () => {
    api.create(service("moving"));
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    api.update(service("moving", { labels: { "service.kubernetes.io/service-proxy-name": "other" } }));
    await waitFor("the delete", () => !sink.has("Service", "default/moving"));
    api.update(service("moving"));
    await waitFor("the return", () => sink.has("Service", "default/moving"));
    assert.deepEqual(sink.calls.slice(1), ["delete Service default/moving", "upsert Service default/moving"]);
  });

  it("skips an invalid update and keeps the last valid copy, also across a relist", async () => {
    api.create(service("flaky", { clusterIP: "198.51.100.20" }));
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    const broken = service("flaky");
    (broken.spec as { clusterIP: string }).clusterIP = "not-an-ip";
    api.update(broken);
    api.create(service("marker"));
    await waitFor("the marker", () => sink.has("Service", "default/marker"));
    api.expireWatches();
    await waitFor("a relist", () => serviceLists().length === 2);
    await waitFor("the replace", () => sink.calls.filter((c) => c.startsWith("replace")).length === 2);
    assert.deepEqual(sink.names("Service"), ["default/flaky", "default/marker"]);
    const kept = sink.objects.get("Service default/flaky");
    assert.equal(kept?.kind === "Service" && kept.clusterIP, "198.51.100.20");
  });

  it("watches only its own Node through the field selector", async () => {
    api.create(node("node-1"));
    api.create(node("node-2"));
    const reflector = startReflector({ spec: NODES });
    await reflector.listed;
    assert.deepEqual(sink.names("Node"), ["node-1"]);
    await waitFor("a watch", () => api.watchCount === 1);
    api.update(node("node-2", { zone: "b" }));
    api.update(node("node-1", { zone: "a" }));
    await waitFor("the node update", () => sink.calls.length === 2);
    assert.deepEqual(sink.calls, ["replace Node [node-1]", "upsert Node node-1"]);
  });

  it("counts lists by reason, events by type, and errors, and reports the last event's age", async () => {
    const value = async (name: string, labels: Record<string, string>) => {
      const metric = await registry.getSingleMetric(name)?.get();
      const found = metric?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x));
      return found?.value ?? 0;
    };
    const expiredBefore = await value("kpng_kube_lists_total", { resource: "services", reason: "expired" });
    const addedBefore = await value("kpng_kube_watch_events_total", { resource: "services", type: "ADDED" });
    const httpBefore = await value("kpng_kube_errors_total", { resource: "services", reason: "http" });
    api.fail(503, 1);
    const reflector = startReflector();
    await reflector.listed;
    await waitFor("a watch", () => api.watchCount === 1);
    api.create(service("counted"));
    await waitFor("the object", () => sink.has("Service", "default/counted"));
    api.expireWatches();
    await waitFor("a relist", () => serviceLists().length === 3);
    assert.equal(
      await value("kpng_kube_lists_total", { resource: "services", reason: "expired" }),
      expiredBefore + 1,
    );
    assert.equal(
      await value("kpng_kube_watch_events_total", { resource: "services", type: "ADDED" }),
      addedBefore + 1,
    );
    assert.equal(
      await value("kpng_kube_errors_total", { resource: "services", reason: "http" }),
      httpBefore + 1,
    );
    const age = await value("kpng_kube_last_event_age_seconds", { resource: "services" });
    assert.ok(age >= 0 && age < 5, `age ${age}`);
  });

  it("stops promptly while a request hangs", async () => {
    api.silence();
    const reflector = startReflector({ timings: { inactivityTimeoutMs: 60_000 } });
    await waitFor("the list request", () => serviceLists().length === 1);
    const started = Date.now();
    await reflector.stop();
    assert.ok(Date.now() - started < 200);
  });
});

describe("reflector on a scripted transport", () => {
  /** Answers requests in order with canned bodies, each split into the given chunks. */
  class ScriptedTransport implements KubeTransport {
    readonly paths: string[] = [];
    readonly #responses: (readonly Buffer[])[];
    constructor(responses: (readonly Buffer[])[]) {
      this.#responses = responses;
    }
    async get(pathAndQuery: string, signal: AbortSignal): Promise<ApiResponse> {
      this.paths.push(pathAndQuery);
      const chunks = this.#responses.shift();
      if (!chunks) {
        // Nothing more to say: hang until aborted.
        return await new Promise((_resolve, reject) =>
          signal.addEventListener("abort", () => reject(signal.reason)),
        );
      }
      return Object.assign(Readable.from(chunks), { statusCode: 200 });
    }
  }

  it("parses watch lines cut anywhere (even inside a UTF-8 character) and skips undecodable ones", async () => {
    const list = Buffer.from(JSON.stringify({ metadata: { resourceVersion: "10" }, items: [] }));
    const annotated = service("ünïcode-ok");
    annotated.metadata.name = "utf8";
    annotated.metadata.annotations = { note: "ünïcode ✓" };
    const lines = Buffer.from(
      `${JSON.stringify({ type: "ADDED", object: { ...annotated, metadata: { ...annotated.metadata, resourceVersion: "11" } } })}\n` +
        "{this is not json\n" +
        `${JSON.stringify({ type: "ADDED", object: { ...service("second"), metadata: { ...service("second").metadata, resourceVersion: "12" } } })}`,
    );
    // One byte at a time: every boundary, including inside multi-byte characters.
    const chunks = [...lines].map((b) => Buffer.from([b]));
    const transport = new ScriptedTransport([[list], chunks]);
    const sink = new RecordingSink();
    const reflector = new Reflector(SERVICES!, sink, {
      transport,
      log: silentLogger,
      timings: FAST,
      random: () => 0,
    });
    reflector.start();
    try {
      await waitFor("both objects", () => sink.has("Service", "default/second"));
      const utf8 = sink.objects.get("Service default/utf8");
      assert.equal(utf8?.metadata.annotations.note, "ünïcode ✓");
      await waitFor("the resume", () => transport.paths.length === 3);
      assert.match(transport.paths[2]!, /resourceVersion=12/);
    } finally {
      await reflector.stop();
    }
  });
});
