// Minimal HTTP helpers for tests that talk to the test API server directly.

import http, { type IncomingMessage } from "node:http";
import { JsonLineSplitter } from "../../src/kube/json-lines.ts";

export interface WatchEvent {
  readonly type: string;
  readonly object: {
    readonly kind?: string;
    readonly code?: number;
    readonly metadata: {
      readonly name?: string;
      readonly namespace?: string;
      readonly resourceVersion: string;
    };
  };
}

export async function request(
  url: string,
  options: { method?: string; body?: unknown; signal?: AbortSignal } = {},
): Promise<{ status: number; body: ApiBody }> {
  // A body always goes with its length: Node sends none for DELETE unless told.
  const body = options.body === undefined ? undefined : JSON.stringify(options.body);
  const headers = body === undefined ? {} : { "Content-Length": Buffer.byteLength(body) };
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = http.request(
      url,
      { method: options.method ?? "GET", signal: options.signal, agent: false, headers },
      resolve,
    );
    req.on("error", reject);
    req.end(body);
  });
  const chunks: Buffer[] = [];
  for await (const chunk of res as AsyncIterable<Buffer>) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8");
  return { status: res.statusCode ?? 0, body: (text === "" ? {} : JSON.parse(text)) as ApiBody };
}

/** A list, an object or a Status, as tests read them. */
export interface ApiBody {
  readonly kind?: string;
  readonly reason?: string;
  readonly code?: number;
  readonly metadata: {
    readonly name?: string;
    readonly resourceVersion?: string;
    readonly continue?: string;
    readonly remainingItemCount?: number;
  };
  readonly items: readonly {
    readonly metadata: { readonly name: string; readonly resourceVersion: string };
  }[];
}

/** An open watch: collects events; `until` waits for a condition over everything received. */
export class WatchStream {
  readonly events: WatchEvent[] = [];
  status = 0;
  ended = false;
  readonly #controller = new AbortController();
  readonly #waiters = new Set<() => void>();
  readonly opened: Promise<void>;

  constructor(url: string) {
    this.opened = new Promise((resolve, reject) => {
      const req = http.get(url, { signal: this.#controller.signal, agent: false }, (res) => {
        this.status = res.statusCode ?? 0;
        resolve();
        const splitter = new JsonLineSplitter();
        res.on("data", (chunk: Buffer) => {
          for (const line of splitter.push(chunk)) this.events.push(JSON.parse(line) as WatchEvent);
          this.#wake();
        });
        res.on("end", () => {
          this.ended = true;
          this.#wake();
        });
        res.on("error", () => {
          this.ended = true;
          this.#wake();
        });
      });
      req.on("error", (err) => {
        this.ended = true;
        this.#wake();
        reject(err);
      });
    });
    this.opened.catch(() => {});
  }

  #wake(): void {
    for (const w of this.#waiters) w();
  }

  async until(condition: (events: WatchEvent[], ended: boolean) => boolean, timeoutMs = 3000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition(this.events, this.ended)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`watch condition not met; got ${JSON.stringify(this.events)}`);
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.#waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, left);
        this.#waiters.add(done);
      });
    }
  }

  close(): void {
    this.#controller.abort();
  }
}
