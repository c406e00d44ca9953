// `kpng cleanup all`: every backend's cleanup runs with its default options, a failure of one
// does not stop the others, and the command then fails naming it.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { cleanupAll } from "../../../src/cli/cleanup-all.ts";
import { localSinks } from "../../../src/cli/plugins.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import type { LocalSinkPlugin } from "../../../src/plugin/contracts.ts";

const ctx = { signal: new AbortController().signal, log: silentLogger };

function sink(name: string, calls: string[], fail = false): LocalSinkPlugin {
  return {
    name,
    description: name,
    binaries: [],
    addOptions: () => {},
    parseOptions: () => ({ table: `${name}-default` }),
    run: async () => {},
    cleanup: async (opts) => {
      calls.push(`${name}:${(opts as { table: string }).table}`);
      if (fail) throw new Error("nft: Operation not permitted");
    },
  };
}

describe("kpng cleanup all", () => {
  it("runs every backend's cleanup with its default options", async () => {
    const calls: string[] = [];
    const noCleanup = { ...sink("to-json", calls), cleanup: undefined };
    await cleanupAll([sink("to-nft", calls), noCleanup, sink("to-iptables", calls)], ctx);
    assert.deepEqual(calls, ["to-nft:to-nft-default", "to-iptables:to-iptables-default"]);
  });

  it("goes on after a failure, then fails naming the backend", async () => {
    const calls: string[] = [];
    await assert.rejects(
      cleanupAll([sink("to-nft", calls, true), sink("to-iptables", calls)], ctx),
      /cleanup all failed: to-nft: nft: Operation not permitted/,
    );
    assert.deepEqual(calls, ["to-nft:to-nft-default", "to-iptables:to-iptables-default"]);
  });

  it("every kernel backend of this build parses its options from nothing (its defaults)", () => {
    for (const s of localSinks.filter((x) => x.cleanup !== undefined))
      assert.doesNotThrow(() => s.parseOptions({}));
  });
});
