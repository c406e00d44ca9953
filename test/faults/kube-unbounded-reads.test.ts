// Fault: the kube source read without limits. A watch line that never ended grew RSS by 20 MB/s;
// a list trickled one byte every 2 s never completed, and nothing was logged.

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { JsonLineSplitter } from "../../src/kube/json-lines.ts";
import { Reflector, type ReflectorTimings } from "../../src/kube/reflector.ts";
import { registry } from "../../src/observability/metrics.ts";
import { resourceSpecs } from "../../src/sources/kube/source.ts";
import { service } from "../apiserver/fixtures.ts";
import { TestApiServer } from "../apiserver/server.ts";
import { RecordingSink, transportTo } from "../unit/sources/kube/helpers.ts";
import { capturingLogger, eventually } from "./support.ts";

const [SERVICES] = resourceSpecs({ nodeName: "node-1" });

const FAST: Partial<ReflectorTimings> = {
  inactivityTimeoutMs: 5000,
  minHealthyWatchMs: 50,
  backoff: { initialMs: 20, maxMs: 200, jitter: 0 },
};

async function errors(reason: string): Promise<number> {
  const metric = await registry.getSingleMetric("kpng_kube_errors_total")?.get();
  return (
    metric?.values.find((v) => v.labels.resource === "services" && v.labels.reason === reason)?.value ?? 0
  );
}

describe("fault: the kube source reads without limits", () => {
  let api: TestApiServer;
  let reflector: Reflector | undefined;

  beforeEach(async () => {
    api = await TestApiServer.start({ bookmarkIntervalMs: 0 });
  });
  afterEach(async () => {
    await reflector?.stop();
    reflector = undefined;
    await api.close();
  });

  const start = (timings: Partial<ReflectorTimings>) => {
    const { log, lines } = capturingLogger();
    const sink = new RecordingSink();
    reflector = new Reflector(SERVICES!, sink, {
      transport: transportTo(api.url),
      log,
      timings: { ...FAST, ...timings },
      random: () => 0,
    });
    reflector.start();
    return { sink, lines };
  };

  test("a watch line that never ends is cut at the limit, logged, counted and the watch retried", {
    timeout: 20_000,
  }, async () => {
    api.create(service("a"));
    api.endlessWatchLine();
    const before = await errors("too_large");
    const { sink, lines } = start({ maxLineBytes: 1024 * 1024 });
    await eventually(() => sink.calls.length > 0, "the list");
    await eventually(
      () => lines.some((l) => /exceeds 1048576 bytes/.test(String(l.err))),
      "a log line",
      10_000,
    );
    assert.ok((await errors("too_large")) > before, "counted");
    const watches = () => api.requests.filter((r) => r.resource === "services" && r.watch).length;
    await eventually(() => watches() >= 2, "the watch retried");
    // Back to a normal server: the next watch works.
    api.endlessWatchLine(false);
    api.create(service("b"));
    await eventually(() => sink.has("Service", "default/b"), "the watch working again", 10_000);
  });

  test("a list that trickles is aborted at the deadline, logged, counted and retried", {
    timeout: 20_000,
  }, async () => {
    api.create(service("a"));
    api.trickleLists(50);
    const before = await errors("deadline");
    const { sink, lines } = start({ listTimeoutMs: 500 });
    await eventually(
      () => lines.some((l) => /did not complete within 500 ms/.test(String(l.err))),
      "a log line",
      5000,
    );
    assert.ok((await errors("deadline")) > before, "counted");
    assert.equal(sink.calls.length, 0, "nothing listed yet");
    api.trickleLists(undefined);
    await eventually(() => sink.has("Service", "default/a"), "the list after the retry", 5000);
  });

  test("a list body beyond its limit is aborted", { timeout: 20_000 }, async () => {
    for (let i = 0; i < 20; i++) api.create(service(`s${i}`));
    const before = await errors("too_large");
    const { lines } = start({ maxListBytes: 1000 });
    await eventually(
      () => lines.some((l) => /list response exceeds 1000 bytes/.test(String(l.err))),
      "a log line",
    );
    assert.ok((await errors("too_large")) > before);
  });

  test("the line splitter holds at most the limit", () => {
    const splitter = new JsonLineSplitter(10);
    assert.deepEqual(splitter.push(Buffer.from('{"a":1}\n{"b"')), ['{"a":1}']);
    assert.throws(() => splitter.push(Buffer.from(":22222222")), /exceeds 10 bytes/);
    assert.deepEqual(splitter.push(Buffer.from("\n{}\n")), ["{}"]);
  });
});
