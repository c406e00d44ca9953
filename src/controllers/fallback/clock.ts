// Time as the controller sees it, behind an interface so tests drive it.

export interface Clock {
  now(): number;
  /** Calls fn after ms; the returned function cancels. */
  after(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    timer.unref?.();
    return () => clearTimeout(timer);
  },
};
