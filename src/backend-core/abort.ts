// Waiting on work that may hang (an nft call) without making shutdown wait for it.

export const ABORTED: unique symbol = Symbol("aborted");

/** Settles like `work`, or with ABORTED as soon as `signal` aborts; `work`'s later failure is ignored. */
export function unlessAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T | typeof ABORTED> {
  work.catch(() => {});
  if (signal.aborted) return Promise.resolve(ABORTED);
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve(ABORTED);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
