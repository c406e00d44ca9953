// Faults of the handover between remote backends: a gaining backend that never confirms, one
// whose client predates sync reports, and one that disconnects mid-handover. The losing backend
// keeps the Service meanwhile (never held by neither); the fallbacks log a warning and count
// kpng_handover_fallbacks_total.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { eventually } from "../support/eventually.ts";
import {
  FALLBACK_MS,
  handoverFallbacks,
  quiet,
  remoteHandoverBrain,
  UNCONFIRMED_MS,
} from "../unit/api/remote-handover-fixture.ts";

const WEB = "ns/web";

describe("fault: the remote backend gaining a relabelled Service does not confirm", () => {
  test("it never confirms: the loser keeps the Service for the fallback, then drops it with a warning and the metric", async () => {
    const brain = await remoteHandoverBrain();
    try {
      const { plain, fallbacksBefore: before } = await brain.beginHandover();
      await brain.clock.advance(FALLBACK_MS - 1);
      await quiet();
      assert.ok(plain.holds(WEB), "dropped before the fallback");
      await brain.clock.advance(1);
      await eventually(async () => !plain.holds(WEB), "the loser to drop web at the fallback");
      assert.equal(await handoverFallbacks(), before + 1);
      const warning = brain.lines.find((l) => String(l.msg).includes("did not confirm a sync holding it"));
      assert.ok(warning, "no warning logged");
      assert.equal(warning.service, WEB);
      assert.equal(warning.node, "n1");
      assert.deepEqual(warning.to, ["legacy"]);
    } finally {
      await brain.close();
    }
  });

  test("its client predates sync reports: the loser drops the Service after the short fixed wait, logged and counted", async () => {
    const brain = await remoteHandoverBrain();
    try {
      const { plain, fallbacksBefore: before } = await brain.beginHandover(true);
      await brain.clock.advance(UNCONFIRMED_MS - 1);
      await quiet();
      assert.ok(plain.holds(WEB), "dropped before the fixed wait");
      await brain.clock.advance(1);
      await eventually(async () => !plain.holds(WEB), "the loser to drop web after the fixed wait");
      assert.equal(await handoverFallbacks(), before + 1);
      const warning = brain.lines.find((l) => String(l.msg).includes("reports no syncs"));
      assert.ok(warning, "no warning logged");
      assert.deepEqual(warning.reportingNoSyncs, ["legacy"]);
    } finally {
      await brain.close();
    }
  });

  test("it disconnects mid-handover: the loser keeps the Service until the gainer is back and confirms", async () => {
    const brain = await remoteHandoverBrain();
    try {
      const { plain, legacy, fallbacksBefore: before } = await brain.beginHandover();
      legacy.stop();
      await brain.clock.advance(FALLBACK_MS / 2);
      await quiet();
      assert.ok(plain.holds(WEB), "dropped while the gainer was away");
      // Back (a restarted client resumes nothing: it gets the full state), and it confirms.
      const back = await brain.backend("legacy");
      assert.ok(back.holds(WEB));
      back.sync();
      await eventually(async () => !plain.holds(WEB), "the loser to drop web once the gainer confirms");
      assert.equal(await handoverFallbacks(), before, "confirmed, no fallback");
    } finally {
      await brain.close();
    }
  });

  test("it disconnects mid-handover and stays away: the fallback still ends the handover", async () => {
    const brain = await remoteHandoverBrain();
    try {
      const { plain, legacy, fallbacksBefore: before } = await brain.beginHandover();
      legacy.stop();
      await quiet();
      await brain.clock.advance(FALLBACK_MS);
      await eventually(async () => !plain.holds(WEB), "the loser to drop web at the fallback");
      assert.equal(await handoverFallbacks(), before + 1);
    } finally {
      await brain.close();
    }
  });
});
