import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type DryRunHost, dryRun } from "../../../../src/backends/nft/dry-run.ts";
import { NftError, type NftRunner } from "../../../../src/backends/nft/runner.ts";
import type { LocalState } from "../../../../src/model/local.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { capturingLogger } from "../../../support/capturing-logger.ts";
import { FakeNft } from "../../../support/fake-nft.ts";
import { manyServices, state, V4 } from "./fixtures.ts";

/** A host whose namespace is a FakeNft (or none can be made), recording what happens to it. */
function fakeHost(namespace: FakeNft | undefined): DryRunHost & {
  printed: string[];
  removed: number;
  checked: string[];
} {
  const checked: string[] = [];
  const checker: NftRunner = {
    run: async () => {
      throw new Error("the whole-ruleset check applies nothing");
    },
    check: async (text) => {
      checked.push(text);
    },
    list: async () => undefined,
  };
  const host = {
    printed: [] as string[],
    removed: 0,
    checked,
    async scratch() {
      if (namespace === undefined)
        throw new Error("ip netns add kpng-dry-run-1 failed: Operation not permitted");
      return {
        runner: namespace,
        remove: async () => {
          host.removed++;
        },
      };
    },
    checker: () => checker,
    print: (text: string) => host.printed.push(text),
  };
  return host;
}

const firstStateOf =
  (s: LocalState) =>
  async (sync: (state: LocalState) => Promise<unknown>): Promise<void> => {
    await sync(s);
  };

describe("to-nft --dry-run", () => {
  test("applies the first state in its own namespace, prints what it applied, and removes the namespace", async () => {
    const namespace = new FakeNft();
    const host = fakeHost(namespace);
    // Chunked like a big cluster: the backend's transactions are 25k statements.
    await dryRun([V4], silentLogger, firstStateOf(state(manyServices(8000))), host);
    assert.equal(host.removed, 1);
    assert.deepEqual(host.checked, [], "each statement was checked by applying it");
    assert.ok(namespace.transactions.length > 1, `${namespace.transactions.length} transactions`);
    // What it printed, applied on a fresh node, gives the table the namespace holds.
    const replay = new FakeNft();
    for (const text of host.printed) await replay.run(text);
    assert.equal(replay.dump(), namespace.dump());
    assert.ok(replay.hasTable("ip", "kpng"));
  });

  test("a transaction nft refuses fails the dry run with nft's message, and the namespace is still removed", async () => {
    const namespace = new FakeNft();
    namespace.failWhile((t) => t.includes("add element"), "Error: Could not process rule: File exists");
    const host = fakeHost(namespace);
    await assert.rejects(
      dryRun([V4], silentLogger, firstStateOf(state(manyServices(10))), host),
      /File exists/,
    );
    assert.equal(host.removed, 1);
    assert.ok(
      host.printed.every((t) => !t.includes("add element")),
      "the refused transaction is not printed",
    );
  });

  test("where no namespace can be made, it says so, prints as it renders and checks the whole once", async () => {
    const host = fakeHost(undefined);
    const { log, lines } = capturingLogger("warn");
    await dryRun([V4], log, firstStateOf(state(manyServices(10))), host);
    assert.ok(host.printed.length > 0);
    assert.deepEqual(host.checked, [host.printed.join("")]);
    const warning = lines.find((l) => String(l.msg).startsWith("no network namespace for the dry run"));
    assert.match(String(warning?.err), /Operation not permitted/);
  });

  test("a refusal of the whole check fails the dry run", async () => {
    const host = fakeHost(undefined);
    host.checker = () => ({
      run: async () => {},
      check: async () => {
        throw new NftError("nft --check failed: Error: syntax error", "syntax error");
      },
      list: async () => undefined,
    });
    await assert.rejects(
      dryRun([V4], silentLogger, firstStateOf(state(manyServices(10))), host),
      /nft --check failed/,
    );
  });
});
