// Jittered exponential backoff that never gives up: each failure doubles the delay up to a cap,
// and a success starts over. Jitter spreads the reconnects of many nodes after an API outage.

export interface BackoffOptions {
  readonly initialMs: number;
  readonly maxMs: number;
  /** Fraction of the delay that is randomised, 0..1: 0.5 gives a delay in [d/2, d]. */
  readonly jitter: number;
  readonly random?: () => number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 30_000, jitter: 0.5 };

export class Backoff {
  readonly #options: BackoffOptions;
  readonly #random: () => number;
  #failures = 0;

  constructor(options: BackoffOptions = DEFAULT_BACKOFF) {
    this.#options = options;
    this.#random = options.random ?? Math.random;
  }

  /** The delay before the next attempt after one more failure. */
  next(): number {
    const exp = Math.min(this.#options.maxMs, this.#options.initialMs * 2 ** this.#failures);
    if (exp < this.#options.maxMs) this.#failures++;
    return Math.round(exp * (1 - this.#options.jitter * this.#random()));
  }

  reset(): void {
    this.#failures = 0;
  }
}
