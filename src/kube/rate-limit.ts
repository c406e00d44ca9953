// The client-side rate limit of requests to the API server (kube-proxy's clientConnection.qps and
// burst, client-go's token bucket): `burst` requests may go at once, then `qps` per second. Each
// list page, watch start and write takes a token when it starts; an open watch stream holds none.

import { type Clock, systemClock } from "../model/clock.ts";
import { histogram } from "../observability/metrics.ts";
import { DEFAULT_BURST, DEFAULT_QPS, type RateLimit } from "./connection-flags.ts";
import type { KubeRequest, KubeRequester } from "./request.ts";
import type { ApiResponse, KubeTransport } from "./transport.ts";

const waitDuration = histogram(
  "rest_client_rate_limiter_duration_seconds",
  "Client-side rate limiter latency in seconds, by verb and host.",
  [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
  ["verb", "host"],
);

/** A token bucket: full (`burst` tokens) at start, refilled at `qps` tokens per second. */
export class TokenBucket {
  readonly #qps: number;
  readonly #burst: number;
  readonly #clock: Clock;
  /** May go below 0: each waiting request has reserved the token it will take. */
  #tokens: number;
  #at: number;

  constructor(limit: RateLimit, clock: Clock = systemClock) {
    this.#qps = limit.qps === 0 ? DEFAULT_QPS : limit.qps;
    this.#burst = limit.burst <= 0 ? DEFAULT_BURST : limit.burst;
    this.#clock = clock;
    this.#tokens = this.#burst;
    this.#at = clock.now();
  }

  /** False when qps is negative: every request goes at once. */
  get limited(): boolean {
    return this.#qps > 0;
  }

  /**
   * Resolves when the caller may send one request, in the order callers asked; rejects with the
   * signal's reason when it aborts first (the reserved token is given back).
   */
  take(signal?: AbortSignal): Promise<void> {
    if (!this.limited) return Promise.resolve();
    signal?.throwIfAborted();
    const now = this.#clock.now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#at) / 1000) * this.#qps);
    this.#at = now;
    this.#tokens -= 1;
    if (this.#tokens >= 0) return Promise.resolve();
    const waitMs = (-this.#tokens / this.#qps) * 1000;
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        cancel();
        this.#tokens += 1;
        reject(signal?.reason);
      };
      const cancel = this.#clock.after(waitMs, () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** Takes a token, timing the wait in rest_client_rate_limiter_duration_seconds. */
async function waitTurn(bucket: TokenBucket, verb: string, host: string, signal?: AbortSignal) {
  if (!bucket.limited) return;
  const started = performance.now();
  await bucket.take(signal);
  waitDuration.observe({ verb, host }, (performance.now() - started) / 1000);
}

/**
 * Whether a GET continues a list (`continue=` in its query): the next page of a list already
 * started, one in flight at a time.
 */
function continuesList(pathAndQuery: string): boolean {
  const q = pathAndQuery.indexOf("?");
  return q >= 0 && new URLSearchParams(pathAndQuery.slice(q + 1)).has("continue");
}

/**
 * A transport whose lists and watches wait for a token of `bucket` before they start. A list
 * takes one token, not one per page. kube-proxy's first list of a kind is one request, served
 * whole from the API server's watch cache. At the default 5 per second, a token per page of 500
 * would hold the first list of 100k Services and their EndpointSlices for 80 s.
 */
export class RateLimitedTransport implements KubeTransport {
  readonly #inner: KubeTransport & { readonly server?: string };
  readonly #bucket: TokenBucket;

  constructor(inner: KubeTransport & { readonly server?: string }, bucket: TokenBucket) {
    this.#inner = inner;
    this.#bucket = bucket;
  }

  get server(): string | undefined {
    return this.#inner.server;
  }

  async get(pathAndQuery: string, signal: AbortSignal): Promise<ApiResponse> {
    if (!continuesList(pathAndQuery)) await waitTurn(this.#bucket, "GET", hostOf(this.#inner.server), signal);
    return await this.#inner.get(pathAndQuery, signal);
  }
}

/** A requester whose requests wait for a token of `bucket` before they start. */
export class RateLimitedRequester implements KubeRequester {
  readonly #inner: KubeRequester;
  readonly #bucket: TokenBucket;
  readonly #host: string;

  constructor(inner: KubeRequester, bucket: TokenBucket, server?: string) {
    this.#inner = inner;
    this.#bucket = bucket;
    this.#host = hostOf(server);
  }

  async send(request: KubeRequest): Promise<unknown> {
    await waitTurn(this.#bucket, request.method, this.#host, request.signal);
    return await this.#inner.send(request);
  }
}

function hostOf(server: string | undefined): string {
  try {
    return server === undefined ? "" : new URL(server).host;
  } catch {
    return "";
  }
}
