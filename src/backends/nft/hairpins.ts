// The hairpin set's elements, `<ip> . <ip>` for every endpoint address some service uses, kept as
// a count of users per address. Many services may share an endpoint; at a million endpoints one
// small record per address and one map lookup per use is what keeps the bookkeeping cheap. An
// element no service uses any more only matches a connection DNATed to its own source, so it
// waits STALE_DELETE_DELAY_MS and goes with the stale chains: an endpoint change stays one
// element change.

import type { ElementOp } from "./transaction.ts";

interface Address {
  readonly ip: string;
  users: number;
  inTable: boolean;
  /** On the touched list of the current plan. */
  touched: boolean;
}

export class HairpinEndpoints {
  readonly #set: string;
  readonly #addresses = new Map<string, Address>();
  readonly #touched: Address[] = [];
  /** Addresses no service uses but still in the table, with the time they became unused. */
  readonly #stale = new Map<Address, number>();

  /** `adopted`: the element keys an existing table holds. */
  constructor(set: string, adopted: Iterable<string> = []) {
    this.#set = set;
    for (const key of adopted) {
      const [a, b] = key.split(" . ");
      if (a !== undefined && a === b)
        this.#addresses.set(a, { ip: a, users: 0, inTable: true, touched: false });
    }
  }

  get hasStale(): boolean {
    return this.#stale.size > 0;
  }

  use(ip: string): void {
    let a = this.#addresses.get(ip);
    if (a === undefined) {
      a = { ip, users: 0, inTable: false, touched: false };
      this.#addresses.set(ip, a);
    }
    a.users++;
    this.#touch(a);
  }

  release(ip: string): void {
    const a = this.#addresses.get(ip);
    if (a === undefined) return;
    a.users--;
    this.#touch(a);
  }

  /** After adoption: addresses in the table that no service uses become stale. */
  retireUnclaimed(now: number): void {
    for (const a of this.#addresses.values())
      if (a.users === 0 && a.inTable && !this.#stale.has(a)) this.#stale.set(a, now);
  }

  /**
   * The additions the touched addresses need, built as they are taken; unused ones start waiting
   * for deletion.
   */
  *additions(now: number): Generator<ElementOp> {
    for (const a of this.#touched) {
      a.touched = false;
      if (a.users > 0) {
        this.#stale.delete(a);
        if (!a.inTable) {
          a.inTable = true;
          yield { op: "add", set: this.#set, key: `${a.ip} . ${a.ip}`, value: "" };
        }
      } else if (a.inTable) {
        if (!this.#stale.has(a)) this.#stale.set(a, now);
      } else this.#addresses.delete(a.ip);
    }
    this.#touched.length = 0;
  }

  /** The keys of elements unused for `delayMs`, now removed from the mirror. */
  expired(now: number, delayMs: number): string[] {
    const out: string[] = [];
    for (const [a, since] of this.#stale) {
      if (now - since < delayMs) continue;
      this.#stale.delete(a);
      if (a.users === 0 && a.inTable) {
        out.push(`${a.ip} . ${a.ip}`);
        this.#addresses.delete(a.ip);
      }
    }
    return out;
  }

  #touch(a: Address): void {
    if (a.touched) return;
    a.touched = true;
    this.#touched.push(a);
  }
}
