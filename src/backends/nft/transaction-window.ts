// The transactions of one table's sync that are in flight at once: a run of transactions that
// commute (element changes only), up to a limit. nft spends most of a large sync parsing, on one
// core per process; the kernel commits the transactions one after another, each atomically.

/**
 * The first failure ends the sync. A transaction that failed while others were in flight is
 * applied again alone before that (it was not applied: nft commits all or nothing), so a failure
 * that only concurrency causes never fails the sync.
 */
export class TransactionWindow {
  readonly #limit: number;
  readonly #flights = new Set<Promise<void>>();
  readonly #active = new Set<{ concurrent: boolean }>();
  readonly #retries: Array<() => Promise<void>> = [];
  #failure: { readonly error: unknown } | undefined;

  constructor(limit: number) {
    this.#limit = Math.max(1, Math.floor(limit));
  }

  get empty(): boolean {
    return this.#flights.size === 0;
  }

  get failed(): boolean {
    return this.#failure !== undefined;
  }

  /** Resolves once another transaction may start. */
  async room(): Promise<void> {
    while (this.#flights.size >= this.#limit) await Promise.race(this.#flights);
  }

  /**
   * Starts `apply`; `alone` applies the same transaction again, by itself, if it failed (with the
   * error given) while others were in flight.
   */
  start(apply: () => Promise<void>, alone: (error: unknown) => Promise<void>): void {
    const flight = { concurrent: this.#active.size > 0 };
    for (const other of this.#active) other.concurrent = true;
    this.#active.add(flight);
    const settled: Promise<void> = apply()
      .then(
        () => {},
        (error: unknown) => {
          if (flight.concurrent) this.#retries.push(() => alone(error));
          else this.#failure ??= { error };
        },
      )
      .finally(() => {
        this.#active.delete(flight);
        this.#flights.delete(settled);
      });
    this.#flights.add(settled);
  }

  /** Waits for everything in flight and the retries; throws the first failure. */
  async drain(): Promise<void> {
    while (this.#flights.size > 0) await Promise.all(this.#flights);
    while (this.#failure === undefined && this.#retries.length > 0) {
      const retry = this.#retries.shift() as () => Promise<void>;
      try {
        await retry();
      } catch (error) {
        this.#failure = { error };
      }
    }
    this.#retries.length = 0;
    if (this.#failure !== undefined) throw this.#failure.error;
  }
}
