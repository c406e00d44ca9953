// The one way to wait: a timer that a stop cuts short. It never rejects, so a loop that sleeps
// between attempts simply checks its signal after waking.

/** Resolves after `ms`, or at once when `signal` aborts (also when it already has). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
