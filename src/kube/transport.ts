// GET requests to the API server on node:http/node:https. TLS material and credentials come from
// the KubeConfig on every request, so rotating tokens (exec plugins, projected service-account
// tokens) are picked up without a restart.

import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
import { applyCredentials } from "./credentials.ts";
import { requestStarted } from "./metrics.ts";

/** What a reflector reads of a response: the status line and the body as it streams in. */
export interface ApiResponse extends AsyncIterable<Buffer> {
  readonly statusCode?: number | undefined;
  readonly statusMessage?: string | undefined;
}

/** How a reflector reaches the API server; tests can put anything HTTP-shaped behind it. */
export interface KubeTransport {
  /** Resolves with the response once its headers arrived; the body is read by the caller. */
  get(pathAndQuery: string, signal: AbortSignal): Promise<ApiResponse>;
}

/** Idle TCP connections through NATs and load balancers die silently; probes notice. */
const TCP_KEEPALIVE_DELAY_MS = 30_000;

export class KubeConfigTransport implements KubeTransport {
  readonly #config: KubeConfig;
  readonly #base: URL;

  constructor(config: KubeConfig) {
    const cluster = config.getCurrentCluster();
    if (!cluster)
      throw new Error("the kubeconfig has no current cluster (set current-context or use --context)");
    this.#config = config;
    this.#base = new URL(cluster.server);
    if (this.#base.protocol !== "http:" && this.#base.protocol !== "https:") {
      throw new Error(`API server URL ${JSON.stringify(cluster.server)} must start with https:// or http://`);
    }
  }

  get server(): string {
    return this.#base.toString();
  }

  async get(pathAndQuery: string, signal: AbortSignal): Promise<IncomingMessage> {
    const options: https.RequestOptions = {};
    await applyCredentials(this.#config, options);
    const url = new URL(this.#base.pathname.replace(/\/$/, "") + pathAndQuery, this.#base);
    const request = this.#base.protocol === "https:" ? https.request : http.request;
    const finished = requestStarted("GET", url);
    return await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(url, {
        ...options,
        method: "GET",
        headers: { ...options.headers, Accept: "application/json" },
        signal,
      });
      req.on("socket", (socket) => socket.setKeepAlive(true, TCP_KEEPALIVE_DELAY_MS));
      req.on("response", (res) => {
        finished(res.statusCode);
        resolve(res);
      });
      req.on("error", (error) => {
        finished(undefined);
        reject(error);
      });
      req.end();
    });
  }
}
