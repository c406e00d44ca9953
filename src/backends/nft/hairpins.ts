// The hairpin set's elements, `<ip> . <ip>` for every endpoint address some service uses, kept as
// a count of users per address. Many services may share an endpoint, and at a million endpoints
// one number per address (no object, no key text) is what keeps the bookkeeping cheap. An
// element no service uses any more only matches a connection DNATed to its own source, so it
// waits STALE_DELETE_DELAY_MS and goes with the stale chains: an endpoint change stays one
// element change.

import type { ElementOp } from "./transaction.ts";

/** Per address: users × 4, plus 2 while touched in this plan, plus 1 while in the table. */
const IN_TABLE = 1;
const TOUCHED = 2;
const USER = 4;

export class HairpinEndpoints {
  readonly #set: string;
  readonly #state = new Map<string, number>();
  readonly #touched: string[] = [];
  /** Addresses no service uses but still in the table, with the time they became unused. */
  readonly #stale = new Map<string, number>();

  /** `adopted`: the element keys an existing table holds. */
  constructor(set: string, adopted: Iterable<string> = []) {
    this.#set = set;
    for (const key of adopted) {
      const [a, b] = key.split(" . ");
      if (a !== undefined && a === b) this.#state.set(a, IN_TABLE);
    }
  }

  get hasStale(): boolean {
    return this.#stale.size > 0;
  }

  use(ip: string): void {
    this.#change(ip, USER);
  }

  release(ip: string): void {
    if (this.#state.has(ip)) this.#change(ip, -USER);
  }

  /** After adoption: addresses in the table that no service uses become stale. */
  retireUnclaimed(now: number): void {
    for (const [ip, v] of this.#state)
      if (v < USER && (v & IN_TABLE) !== 0 && !this.#stale.has(ip)) this.#stale.set(ip, now);
  }

  /** The additions the touched addresses need; unused ones start waiting for deletion. */
  additions(now: number): ElementOp[] {
    const out: ElementOp[] = [];
    for (const ip of this.#touched) {
      let v = this.#state.get(ip)! & ~TOUCHED;
      if (v >= USER) {
        this.#stale.delete(ip);
        if ((v & IN_TABLE) === 0) {
          out.push({ op: "add", set: this.#set, key: `${ip} . ${ip}`, value: "" });
          v |= IN_TABLE;
        }
      } else if ((v & IN_TABLE) !== 0) {
        if (!this.#stale.has(ip)) this.#stale.set(ip, now);
      }
      if (v === 0) this.#state.delete(ip);
      else this.#state.set(ip, v);
    }
    this.#touched.length = 0;
    return out;
  }

  /** The keys of elements unused for `delayMs`, now removed from the mirror. */
  expired(now: number, delayMs: number): string[] {
    const out: string[] = [];
    for (const [ip, since] of this.#stale) {
      if (now - since < delayMs) continue;
      this.#stale.delete(ip);
      const v = this.#state.get(ip);
      if (v === IN_TABLE) {
        out.push(`${ip} . ${ip}`);
        this.#state.delete(ip);
      }
    }
    return out;
  }

  #change(ip: string, delta: number): void {
    let v = (this.#state.get(ip) ?? 0) + delta;
    if ((v & TOUCHED) === 0) {
      v |= TOUCHED;
      this.#touched.push(ip);
    }
    this.#state.set(ip, v);
  }
}
