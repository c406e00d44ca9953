// The runner behind `--dry-run`: the backend syncs exactly as it would for real, and each
// transaction is printed and checked with `nft --check` instead of applied. Tables are treated
// as absent, so the output is what a first sync on a fresh node would apply.

import type { NftFamily } from "../../model/ip.ts";
import type { NftRunner } from "./runner.ts";

export class CheckingNftRunner implements NftRunner {
  readonly #checker: NftRunner;
  readonly #write: (text: string) => void;
  /** What the dry run has "applied" so far: later transactions build on earlier ones. */
  #applied = "";

  constructor(checker: NftRunner, write: (text: string) => void) {
    this.#checker = checker;
    this.#write = write;
  }

  async run(text: string): Promise<void> {
    await this.#checker.check(this.#applied + text);
    this.#applied += text;
    this.#write(text);
  }

  check(text: string): Promise<void> {
    return this.#checker.check(this.#applied + text);
  }

  async listTable(_family: NftFamily, _table: string): Promise<unknown> {
    return undefined;
  }
}
