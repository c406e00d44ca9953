import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { CheckingNftRunner } from "../../../../src/backends/nft/check-runner.ts";
import { NftError, type NftRunner } from "../../../../src/backends/nft/runner.ts";

/** A checker that records what it was asked to check and rejects text holding "bad". */
class RecordingChecker implements NftRunner {
  readonly checked: string[] = [];
  async run(): Promise<void> {
    throw new Error("a dry run applies nothing");
  }
  async check(text: string): Promise<void> {
    this.checked.push(text);
    if (text.includes("bad")) throw new NftError("nft --check failed: syntax error", "bad");
  }
  async list(): Promise<Buffer | undefined> {
    return undefined;
  }
}

describe("CheckingNftRunner (--dry-run)", () => {
  test("prints each transaction as it comes and checks them all once, in order, at the end", async () => {
    const checker = new RecordingChecker();
    const printed: string[] = [];
    const runner = new CheckingNftRunner(checker, (text) => printed.push(text));
    for (const t of ["add table ip kpng\n", "add chain ip kpng a\n", "add chain ip kpng b\n"])
      await runner.run(t);
    assert.deepEqual(printed, ["add table ip kpng\n", "add chain ip kpng a\n", "add chain ip kpng b\n"]);
    // A check per transaction of everything before it was quadratic in the ruleset's size.
    assert.deepEqual(checker.checked, []);
    await runner.verify();
    assert.deepEqual(checker.checked, ["add table ip kpng\nadd chain ip kpng a\nadd chain ip kpng b\n"]);
  });

  test("a ruleset nft rejects fails the verification with nft's message", async () => {
    const runner = new CheckingNftRunner(new RecordingChecker(), () => {});
    await runner.run("add table ip kpng\n");
    await runner.run("bad statement\n");
    await assert.rejects(runner.verify(), /nft --check failed: syntax error/);
  });

  test("nothing run: nothing to check", async () => {
    const checker = new RecordingChecker();
    await new CheckingNftRunner(checker, () => {}).verify();
    assert.deepEqual(checker.checked, []);
  });
});
