// The runners behind `--dry-run`: the backend syncs exactly as it would for real, tables treated
// as absent, so the output is what a first sync on a fresh node would apply.
//
// - ScratchNftRunner applies each transaction in an empty network namespace of the run's own
//   (scratch-netns.ts) and prints it once applied: every statement is checked by the kernel, and
//   the run costs what a cold start costs, transactions overlapping with the rendering of the next.
// - CheckingNftRunner, where no namespace can be made, prints each transaction as it comes and
//   `verify` checks them all with one `nft --check`. One check of the whole, not one per
//   transaction: checking each on top of the ones before parsed the ruleset again every time,
//   quadratic in its size.

import type { NftFamily } from "../../model/ip.ts";
import type { NftListing, NftRunner } from "./runner.ts";

export class ScratchNftRunner implements NftRunner {
  readonly #scratch: NftRunner;
  readonly #write: (text: string) => void;

  /** `scratch` runs nft in the namespace; `write` prints what it applied. */
  constructor(scratch: NftRunner, write: (text: string) => void) {
    this.#scratch = scratch;
    this.#write = write;
  }

  // Printed after it applied: a transaction that failed beside others and is applied again alone
  // is printed once, and the output replays in the order printed (a phase's transactions commute).
  async run(text: string): Promise<void> {
    await this.#scratch.run(text);
    this.#write(text);
  }

  async runConcurrently(text: string): Promise<void> {
    const scratch = this.#scratch;
    await (scratch.runConcurrently ? scratch.runConcurrently(text) : scratch.run(text));
    this.#write(text);
  }

  check(text: string): Promise<void> {
    return this.#scratch.check(text);
  }

  list(family: NftFamily, table: string, what: NftListing): Promise<Buffer | undefined> {
    return this.#scratch.list(family, table, what);
  }

  close(): void {
    this.#scratch.close?.();
  }
}

export class CheckingNftRunner implements NftRunner {
  readonly #checker: NftRunner;
  readonly #write: (text: string) => void;
  /** What the dry run has "applied" so far: later transactions build on earlier ones. */
  readonly #applied: string[] = [];

  constructor(checker: NftRunner, write: (text: string) => void) {
    this.#checker = checker;
    this.#write = write;
  }

  async run(text: string): Promise<void> {
    this.#applied.push(text);
    this.#write(text);
  }

  check(text: string): Promise<void> {
    return this.#checker.check(this.#applied.join("") + text);
  }

  /** Checks every transaction run so far, in order, as one; rejects with nft's message. */
  async verify(): Promise<void> {
    if (this.#applied.length > 0) await this.#checker.check(this.#applied.join(""));
  }

  async list(_family: NftFamily, _table: string, _what: NftListing): Promise<Buffer | undefined> {
    return undefined;
  }
}
