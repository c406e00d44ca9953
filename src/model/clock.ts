// Time as controllers and the brain see it, behind an interface so tests drive it.

export interface Clock {
  /** Milliseconds on a monotonic clock: only differences mean something. */
  now(): number;
  /** Calls fn after ms; the returned function cancels. */
  after(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    timer.unref?.();
    return () => clearTimeout(timer);
  },
};
