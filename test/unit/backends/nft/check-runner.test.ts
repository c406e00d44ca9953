import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { CheckingNftRunner, ScratchNftRunner } from "../../../../src/backends/nft/check-runner.ts";
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

/** A namespace's nft: holds each transaction until let go, refuses text holding "bad". */
class HeldNamespaceNft implements NftRunner {
  readonly applied: string[] = [];
  readonly #held: (() => void)[] = [];
  /** Concurrent calls refused until this many have been. */
  concurrentRefusals = 0;
  run(text: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#held.push(() => {
        if (text.includes("bad")) reject(new NftError("nft -f failed: syntax error", "bad"));
        else {
          this.applied.push(text);
          resolve();
        }
      });
    });
  }
  async runConcurrently(text: string): Promise<void> {
    if (this.concurrentRefusals-- > 0) throw new NftError("nft -f failed: Resource busy", "busy");
    this.applied.push(text);
  }
  letGo(): void {
    for (const go of this.#held.splice(0)) go();
  }
  async check(text: string): Promise<void> {
    if (text.includes("bad")) throw new NftError("nft --check failed: syntax error", "bad");
  }
  async list(): Promise<Buffer | undefined> {
    return Buffer.from('{"nftables": []}');
  }
}

describe("ScratchNftRunner (--dry-run in a namespace of its own)", () => {
  test("prints a transaction once the namespace applied it, not before", async () => {
    const ns = new HeldNamespaceNft();
    const printed: string[] = [];
    const runner = new ScratchNftRunner(ns, (text) => printed.push(text));
    const running = runner.run("add table ip kpng\n");
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(printed, []);
    ns.letGo();
    await running;
    assert.deepEqual(printed, ["add table ip kpng\n"]);
    assert.deepEqual(ns.applied, ["add table ip kpng\n"]);
  });

  test("a transaction the namespace refuses is not printed, and the refusal is nft's", async () => {
    const ns = new HeldNamespaceNft();
    const printed: string[] = [];
    const runner = new ScratchNftRunner(ns, (text) => printed.push(text));
    const running = runner.run("bad statement\n");
    ns.letGo();
    await assert.rejects(running, /nft -f failed: syntax error/);
    assert.deepEqual(printed, []);
  });

  test("one refused beside others and applied again alone is printed once", async () => {
    const ns = new HeldNamespaceNft();
    ns.concurrentRefusals = 1;
    const printed: string[] = [];
    const runner = new ScratchNftRunner(ns, (text) => printed.push(text));
    const tx = "add element ip kpng service-ips { 10.0.0.1 . tcp . 80 : goto svc-a }\n";
    await assert.rejects(runner.runConcurrently(tx), /Resource busy/);
    const alone = runner.run(tx);
    ns.letGo();
    await alone;
    await runner.runConcurrently("add element ip kpng cluster-ips { 10.0.0.2 }\n");
    assert.deepEqual(printed, [tx, "add element ip kpng cluster-ips { 10.0.0.2 }\n"]);
  });

  test("listings and checks go to the namespace", async () => {
    const runner = new ScratchNftRunner(new HeldNamespaceNft(), () => {});
    assert.equal((await runner.list("ip", "kpng", { objects: "chains" }))?.toString(), '{"nftables": []}');
    await assert.rejects(runner.check("bad\n"), /nft --check failed/);
  });
});
