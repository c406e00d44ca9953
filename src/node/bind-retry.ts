// kube-proxy's rule for a node server whose port is taken: log it and try again every 5 s while
// the proxy keeps working, unless bindAddressHardFail makes it fatal.

import type { Server } from "node:http";
import { close } from "../observability/http-listen.ts";
import type { Logger } from "../observability/log.ts";

export const BIND_RETRY_MS = 5000;

interface BindRetryOptions {
  /** "healthz" or "metrics", for the log line. */
  readonly what: string;
  readonly address: string;
  readonly hardFail: boolean;
  readonly log: Logger;
  readonly retryMs?: number;
}

/** A server that listens now, or later once its port is free. */
export class RetryingServer {
  #server: Server | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  /** The listening server, if it listens yet. */
  get server(): Server | undefined {
    return this.#server;
  }

  /**
   * Resolves once the server listens, or once the first attempt failed and retries are scheduled.
   * Rejects on the first failure with hardFail.
   */
  static async start(open: () => Promise<Server>, o: BindRetryOptions): Promise<RetryingServer> {
    const s = new RetryingServer();
    try {
      s.#server = await open();
    } catch (err) {
      if (o.hardFail) throw err;
      s.#retryLater(open, o, err);
    }
    return s;
  }

  #retryLater(open: () => Promise<Server>, o: BindRetryOptions, err: unknown): void {
    const retryMs = o.retryMs ?? BIND_RETRY_MS;
    o.log.error(
      { server: o.what, address: o.address, err: (err as Error).message, retryInMs: retryMs },
      "cannot listen; proxying goes on, retrying (bindAddressHardFail makes this fatal)",
    );
    this.#timer = setTimeout(() => {
      open().then(
        (server) => {
          if (this.#closed) return void close(server);
          this.#server = server;
          o.log.info({ server: o.what, address: o.address }, "listening");
        },
        (e: unknown) => {
          if (!this.#closed) this.#retryLater(open, o, e);
        },
      );
    }, retryMs);
    this.#timer.unref?.();
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    if (this.#server !== undefined) await close(this.#server);
  }
}
