// A gRPC server for streaming methods over node:http2: routing by path, plain or TLS (client
// certificates required when a CA is given), keepalive pings, unix and TCP listeners, and the
// two ways of stopping (gracefully with a status, or by dropping every connection).

import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { GrpcServerCall, GrpcStatus, refuseStream } from "./grpc-stream.ts";

interface GrpcMethod<Req> {
  readonly decode: (bytes: Uint8Array) => Req;
  readonly handle: (call: GrpcServerCall<Req>) => void;
}

interface GrpcServerOptions {
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer; readonly ca?: Buffer };
  /** Server ping interval; a connection whose ping is not answered in keepaliveTimeoutMs is dropped. */
  readonly keepaliveMs: number;
  readonly keepaliveTimeoutMs: number;
  /** Streams one connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  readonly maxStreamsPerConnection?: number;
}

/** A backend needs one or two streams; 100 (the usual HTTP/2 default) leaves room for multiplexing clients. */
const DEFAULT_MAX_STREAMS_PER_CONNECTION = 100;

type ListenTarget = { readonly path: string } | { readonly host: string; readonly port: number };

export class GrpcServer {
  readonly #methods = new Map<string, GrpcMethod<unknown>>();
  readonly #options: GrpcServerOptions;
  readonly #servers: (http2.Http2Server | http2.Http2SecureServer)[] = [];
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  readonly #calls = new Set<GrpcServerCall<unknown>>();

  constructor(options: GrpcServerOptions) {
    this.#options = options;
  }

  addMethod<Req>(path: string, method: GrpcMethod<Req>): void {
    this.#methods.set(path, method as GrpcMethod<unknown>);
  }

  /** Listens; resolves with the bound port (TCP) or 0 (unix socket). */
  async listen(target: ListenTarget): Promise<number> {
    const tls = this.#options.tls;
    const settings = {
      maxConcurrentStreams: this.#options.maxStreamsPerConnection ?? DEFAULT_MAX_STREAMS_PER_CONNECTION,
    };
    const server =
      tls === undefined
        ? http2.createServer({ settings })
        : http2.createSecureServer({
            settings,
            cert: tls.cert,
            key: tls.key,
            ca: tls.ca,
            requestCert: tls.ca !== undefined,
            rejectUnauthorized: tls.ca !== undefined,
          });
    server.on("session", (session) => this.#track(session));
    server.on("stream", (stream, headers) => this.#route(stream, headers));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen("path" in target ? target.path : { host: target.host, port: target.port }, () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.#servers.push(server);
    const address = server.address();
    return typeof address === "object" && address !== null ? (address as AddressInfo).port : 0;
  }

  /** Every open call's pending output, for monitoring and tests. */
  calls(): readonly GrpcServerCall<unknown>[] {
    return [...this.#calls];
  }

  /** Ends every call with UNAVAILABLE (clients reconnect) and closes the listeners. */
  async stop(): Promise<void> {
    const closed = Promise.all(
      this.#servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))),
    );
    for (const call of this.#calls) call.finish(GrpcStatus.UNAVAILABLE, "server shutting down");
    for (const session of this.#sessions) session.close();
    const grace = setTimeout(() => this.forceStop(), 2000);
    await closed;
    clearTimeout(grace);
  }

  /** Drops every connection at once, as a crashed server would. */
  forceStop(): void {
    for (const server of this.#servers) server.close();
    for (const session of this.#sessions) session.destroy();
  }

  #track(session: http2.ServerHttp2Session): void {
    this.#sessions.add(session);
    session.on("error", () => {});
    const { keepaliveMs, keepaliveTimeoutMs } = this.#options;
    const pinger = setInterval(() => {
      if (session.destroyed) return;
      const deadline = setTimeout(() => session.destroy(), keepaliveTimeoutMs);
      try {
        session.ping(() => clearTimeout(deadline));
      } catch {
        clearTimeout(deadline);
      }
    }, keepaliveMs);
    pinger.unref();
    session.on("close", () => {
      clearInterval(pinger);
      this.#sessions.delete(session);
    });
  }

  #route(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on("error", () => {});
    const contentType = headers["content-type"] ?? "";
    if (headers[":method"] !== "POST" || !contentType.startsWith("application/grpc")) {
      stream.respond({ ":status": 415 }, { endStream: true });
      return;
    }
    const method = this.#methods.get(headers[":path"] ?? "");
    if (method === undefined) {
      refuseStream(stream, GrpcStatus.UNIMPLEMENTED, `unknown method ${headers[":path"]}`);
      return;
    }
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") {
      refuseStream(stream, GrpcStatus.UNIMPLEMENTED, `grpc-encoding ${encoding} is not supported`);
      return;
    }
    const call = new GrpcServerCall(stream, method.decode);
    this.#calls.add(call);
    call.onClose(() => this.#calls.delete(call));
    method.handle(call);
  }
}
