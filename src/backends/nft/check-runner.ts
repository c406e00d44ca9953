// The runner behind `--dry-run`: the backend syncs exactly as it would for real, and each
// transaction is printed instead of applied; `verify` then checks everything printed with one
// `nft --check`, as a fresh node would apply it. Tables are treated as absent, so the output is
// what a first sync on a fresh node would apply.
//
// One check of the whole, not one per transaction: checking each transaction on top of the ones
// before it parsed the ruleset again for every transaction, quadratic in its size (minutes for a
// ruleset of a hundred transactions).

import type { NftFamily } from "../../model/ip.ts";
import type { NftListing, NftRunner } from "./runner.ts";

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
