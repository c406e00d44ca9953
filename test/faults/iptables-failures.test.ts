// Fault: iptables-restore failing, hanging, and kpng's chains flushed from outside. Each must be
// logged and counted, retried with backoff until the rules are in line again, and never hold
// shutdown.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { IptablesBackend } from "../../src/backends/iptables/backend.ts";
import { ExecIptablesRunner, IptablesError } from "../../src/backends/iptables/runner.ts";
import { silentLogger } from "../../src/observability/log.ts";
import { registry } from "../../src/observability/metrics.ts";
import { FakeIptables } from "../support/fake-iptables.ts";
import { service, state, V4, V6 } from "../unit/backends/iptables/fixtures.ts";
import { capturingLogger, eventually, ManualFeed } from "./support.ts";

/** Runs every iptables binary as a process that never answers; `exec` so no orphan is left. */
const HUNG = ["sh", "-c", "exec sleep 60", "iptables"];

async function counter(name: string, family: string): Promise<number> {
  const metric = await registry.getSingleMetric(name)?.get();
  return (
    metric?.values.find((v) => v.labels.backend === "iptables" && v.labels.family === family)?.value ?? 0
  );
}

describe("fault: iptables-restore fails, hangs, or kpng's chains are flushed", () => {
  test("a failing restore is logged with its stderr, counted, unhealthy, and retried until it works", {
    timeout: 15_000,
  }, async () => {
    const ipt = new FakeIptables();
    ipt.failNext = 2;
    const { log, lines } = capturingLogger();
    const backend = new IptablesBackend({ runner: ipt, families: [V4], log });
    const before = await counter("kpng_sync_failures_total", "IPv4");
    const ac = new AbortController();
    const running = backend.run(new ManualFeed(state([service()])), ac.signal);
    try {
      await eventually(() => lines.some((l) => l.level === 50), "an error line");
      const error = lines.find((l) => l.level === 50)!;
      assert.equal(error.family, "IPv4");
      assert.equal(error.stderr, "injected failure");
      assert.equal(error.retryInMs, 1000);
      assert.equal(backend.health().healthy, false);
      // Retries after 1 s, then 2 s; the third attempt works.
      await eventually(() => backend.health().healthy, "in line after the retries", 8000);
      assert.equal((await counter("kpng_sync_failures_total", "IPv4")) - before, 2);
      assert.ok(ipt.rules("IPv4", "nat", "KPNG-SERVICES")?.length);
      assert.ok(lines.some((l) => /in line again/.test(String(l.msg))));
    } finally {
      ac.abort();
      await running;
    }
  });

  test("a hung iptables-restore fails after the deadline, and the process is killed", {
    timeout: 10_000,
  }, async () => {
    const runner = new ExecIptablesRunner("nft", { prefix: HUNG, timeoutMs: 300 });
    const started = performance.now();
    await assert.rejects(runner.restore("IPv4", "*nat\nCOMMIT\n"), (e: Error) => {
      assert.ok(e instanceof IptablesError);
      assert.match(e.message, /timed out after 300 ms/);
      return true;
    });
    assert.ok(performance.now() - started < 2000);
  });

  test("a hung check of the rules fails after its deadline rather than holding the probe", {
    timeout: 15_000,
  }, async () => {
    const runner = new ExecIptablesRunner("nft", { prefix: HUNG });
    await assert.rejects(runner.hasRules("IPv4", "nat", "KPNG-SERVICES"), /timed out/);
  });

  test("the sync loop stops at abort while a restore hangs, or while the probe hangs", {
    timeout: 10_000,
  }, async () => {
    for (const hang of ["restore", "probe"] as const) {
      const ipt = new FakeIptables();
      if (hang === "restore") ipt.hangRestores = true;
      const backend = new IptablesBackend({
        runner: ipt,
        families: [V4],
        log: silentLogger,
        canaryIntervalMs: 10,
      });
      const ac = new AbortController();
      const running = backend.run(new ManualFeed(state([service()])), ac.signal);
      if (hang === "probe") {
        await eventually(() => backend.health().healthy, "the first sync");
        ipt.hangChecks = true;
        const checks = ipt.checks;
        await eventually(() => ipt.checks > checks, "a hung check");
      } else {
        await new Promise((r) => setTimeout(r, 50));
      }
      const aborted = performance.now();
      ac.abort();
      await running;
      assert.ok(performance.now() - aborted < 1000, `${hang}: stopped at once`);
    }
  });

  test("chains flushed from outside are counted as a repair, logged, and rewritten; the other family is left alone", {
    timeout: 10_000,
  }, async () => {
    const ipt = new FakeIptables();
    const { log, lines } = capturingLogger();
    const backend = new IptablesBackend({ runner: ipt, families: [V4, V6], log, canaryIntervalMs: 20 });
    const before = await counter("kpng_rules_repairs_total", "IPv4");
    const ac = new AbortController();
    const running = backend.run(new ManualFeed(state([service()])), ac.signal);
    try {
      await eventually(() => backend.health().healthy, "the first sync");
      const v6Restores = ipt.restores.filter((r) => r.family === "IPv6").length;
      ipt.edit("IPv4", "nat", (c) => c.get("KPNG-SERVICES")?.splice(0));
      await eventually(
        () => (ipt.rules("IPv4", "nat", "KPNG-SERVICES")?.length ?? 0) > 0,
        "the rewrite",
        2000,
      );
      assert.equal((await counter("kpng_rules_repairs_total", "IPv4")) - before, 1);
      assert.ok(
        lines.some(
          (l) => l.level === 40 && l.family === "IPv4" && /flushed by another program/.test(String(l.msg)),
        ),
      );
      assert.equal(ipt.restores.filter((r) => r.family === "IPv6").length, v6Restores, "IPv6 not rewritten");
    } finally {
      ac.abort();
      await running;
    }
  });
});
