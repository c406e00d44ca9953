// Writes to the API server (POST, PUT, DELETE) and single GETs, with a deadline on each, for
// controllers. The same KubeConfig as the reflectors' transport supplies server and credentials.

import http from "node:http";
import https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
import { applyCredentials } from "./credentials.ts";
import { requestStarted } from "./metrics.ts";
import { ApiStatusError } from "./reflector.ts";

export interface KubeRequest {
  readonly method: "GET" | "POST" | "PUT" | "DELETE";
  /** From the API root: "/api/v1/namespaces/ns/events". */
  readonly path: string;
  readonly body?: unknown;
  /** Aborts the request (besides its own deadline): e.g. when a controller stops leading. */
  readonly signal?: AbortSignal;
}

/** Sends one request; resolves with the decoded body of a 2xx, rejects with ApiStatusError otherwise. */
export interface KubeRequester {
  send(request: KubeRequest): Promise<unknown>;
}

const MAX_BODY = 16 * 1024 * 1024;

export class KubeConfigRequester implements KubeRequester {
  readonly #config: KubeConfig;
  readonly #base: URL;
  readonly #timeoutMs: number;

  constructor(config: KubeConfig, timeoutMs = 10_000) {
    const cluster = config.getCurrentCluster();
    if (!cluster)
      throw new Error("the kubeconfig has no current cluster (set current-context or use --context)");
    this.#config = config;
    this.#base = new URL(cluster.server);
    this.#timeoutMs = timeoutMs;
  }

  async send(request: KubeRequest): Promise<unknown> {
    const options: https.RequestOptions = {};
    await applyCredentials(this.#config, options);
    const url = new URL(this.#base.pathname.replace(/\/$/, "") + request.path, this.#base);
    const body = request.body === undefined ? undefined : JSON.stringify(request.body);
    const send = this.#base.protocol === "https:" ? https.request : http.request;
    const deadline = AbortSignal.timeout(this.#timeoutMs);
    const signal = request.signal === undefined ? deadline : AbortSignal.any([deadline, request.signal]);
    const finished = requestStarted(request.method, url);
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const fail = (error: Error) => {
        finished(undefined);
        reject(error);
      };
      const req = send(url, {
        ...options,
        method: request.method,
        headers: {
          ...options.headers,
          Accept: "application/json",
          ...(body !== undefined && {
            "Content-Type": "application/json",
            "Content-Length": Buffer.byteLength(body),
          }),
        },
        signal,
      });
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY)
            req.destroy(new Error(`response to ${request.method} ${request.path} too large`));
          else chunks.push(chunk);
        });
        res.on("end", () => {
          finished(res.statusCode);
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") });
        });
        res.on("error", fail);
      });
      req.on("error", fail);
      req.end(body);
    });
    let decoded: unknown;
    try {
      decoded = text === "" ? {} : JSON.parse(text);
    } catch {
      decoded = { message: text.slice(0, 200) };
    }
    if (status >= 200 && status < 300) return decoded;
    const s = decoded as { reason?: unknown; message?: unknown };
    throw new ApiStatusError(status, String(s.reason ?? ""), String(s.message ?? ""));
  }
}
