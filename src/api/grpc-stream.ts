// One gRPC call on an HTTP/2 stream, server side (the gRPC-over-HTTP/2 protocol: length-prefixed
// messages, status in trailers). Responses are written as batches of pre-encoded messages: a full
// state is ~100k small messages per client, and one HTTP/2 write per message (as a
// general-purpose gRPC server does) costs more than everything else together.

import { once } from "node:events";
import type { ServerHttp2Stream } from "node:http2";
import type { Frame } from "./frames.ts";
import { takeBatch } from "./write-batches.ts";

/** gRPC status codes used here. */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  INVALID_ARGUMENT: 3,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

const PREFIX = 5;

/** A request message larger than this ends the call (requests are a few bytes). */
const MAX_REQUEST_BYTES = 64 * 1024;

const responseHeaders = {
  ":status": 200,
  "content-type": "application/grpc",
  "grpc-accept-encoding": "identity",
};

/** grpc-message is percent-encoded outside printable ASCII. */
function grpcMessage(text: string): string {
  return text.replace(/[^\x20-\x24\x26-\x7e]/gu, (c) => encodeURIComponent(c));
}

/** Ends a stream that never became a call: a trailers-only response. */
export function refuseStream(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.destroyed || stream.closed) return;
  stream.respond(
    { ...responseHeaders, "grpc-status": String(code), "grpc-message": grpcMessage(message) },
    { endStream: true },
  );
}

export class GrpcServerCall<Req> {
  readonly #stream: ServerHttp2Stream;
  readonly #decode: (bytes: Uint8Array) => Req;
  #input: Buffer = Buffer.alloc(0);
  #headersSent = false;
  #finished = false;
  #status: { code: number; message: string } = { code: GrpcStatus.OK, message: "" };
  /** Frames handed to write() and not yet given to the HTTP/2 stream. */
  #queuedFrames = 0;
  readonly #requestListeners: ((req: Req) => void)[] = [];
  readonly #endListeners: (() => void)[] = [];
  readonly #closeListeners: (() => void)[] = [];
  #closed = false;

  constructor(stream: ServerHttp2Stream, decode: (bytes: Uint8Array) => Req) {
    this.#stream = stream;
    this.#decode = decode;
    stream.on("data", (chunk: Buffer) => this.#receive(chunk));
    stream.on("end", () => {
      for (const l of this.#endListeners) l();
    });
    stream.on("error", () => {});
    stream.on("close", () => {
      this.#closed = true;
      for (const l of this.#closeListeners) l();
    });
    stream.on("wantTrailers", () => {
      stream.sendTrailers({
        "grpc-status": String(this.#status.code),
        "grpc-message": grpcMessage(this.#status.message),
      });
    });
  }

  get closed(): boolean {
    return this.#closed || this.#stream.destroyed;
  }

  /** Frames this call still has to hand to HTTP/2, and the bytes HTTP/2 holds for it unsent. */
  get pending(): { readonly frames: number; readonly bytes: number } {
    return { frames: this.#queuedFrames, bytes: this.#stream.writableLength };
  }

  onRequest(listener: (req: Req) => void): void {
    this.#requestListeners.push(listener);
  }

  /** The client half-closed: it will send no more requests. */
  onEnd(listener: () => void): void {
    this.#endListeners.push(listener);
  }

  /** The stream is gone (finished, cancelled, or the connection broke). */
  onClose(listener: () => void): void {
    if (this.#closed) queueMicrotask(listener);
    else this.#closeListeners.push(listener);
  }

  /**
   * Writes frames (pre-framed messages) in batches of about BATCH_BYTES, one HTTP/2 write each
   * (see write-batches.ts); waits for 'drain' whenever HTTP/2 holds more than its buffer, so a
   * client that stops reading costs at most one batch plus the stream's buffer here, and the
   * rest of the change set stays unwritten.
   */
  async write(frames: readonly Frame[], signal: AbortSignal): Promise<void> {
    this.#sendHeaders();
    let i = 0;
    this.#queuedFrames = frames.length;
    const stream = this.#stream;
    try {
      while (i < frames.length && !signal.aborted && !this.closed) {
        const batch = takeBatch(frames, i);
        i += batch.count;
        const done = (err: Error | null | undefined) => {
          if (err === undefined || err === null) batch.release();
        };
        const { pieces } = batch;
        if (pieces.length === 1) stream.write(pieces[0], done);
        else {
          // Corked, the pieces reach HTTP/2 as one vectored write.
          stream.cork();
          for (let p = 0; p < pieces.length - 1; p++) stream.write(pieces[p]);
          stream.write(pieces[pieces.length - 1], done);
          stream.uncork();
        }
        this.#queuedFrames = frames.length - i;
        if (stream.writableNeedDrain) await once(stream, "drain", { signal });
      }
    } finally {
      this.#queuedFrames = 0;
    }
  }

  /** Ends the call with a status (OK by default). */
  finish(code: number = GrpcStatus.OK, message = ""): void {
    if (this.#finished || this.closed) return;
    this.#finished = true;
    if (!this.#headersSent) {
      this.#headersSent = true;
      refuseStream(this.#stream, code, message);
      return;
    }
    this.#status = { code, message };
    this.#stream.end();
  }

  /** Drops the stream without a status, as a broken connection would. */
  destroy(): void {
    this.#stream.close(0x8 /* CANCEL */);
  }

  #sendHeaders(): void {
    if (this.#headersSent) return;
    this.#headersSent = true;
    this.#stream.respond(responseHeaders, { waitForTrailers: true });
  }

  #receive(chunk: Buffer): void {
    this.#input = this.#input.length === 0 ? chunk : Buffer.concat([this.#input, chunk]);
    while (this.#input.length >= PREFIX && !this.#finished) {
      const compressed = this.#input[0] !== 0;
      const length = this.#input.readUInt32BE(1);
      if (length > MAX_REQUEST_BYTES) {
        this.finish(
          GrpcStatus.RESOURCE_EXHAUSTED,
          `request of ${length} bytes (at most ${MAX_REQUEST_BYTES})`,
        );
        return;
      }
      if (this.#input.length < PREFIX + length) return;
      const body = this.#input.subarray(PREFIX, PREFIX + length);
      this.#input = this.#input.subarray(PREFIX + length);
      if (compressed) {
        this.finish(GrpcStatus.UNIMPLEMENTED, "compressed requests are not supported");
        return;
      }
      let req: Req;
      try {
        req = this.#decode(body);
      } catch (err) {
        this.finish(GrpcStatus.INVALID_ARGUMENT, `unreadable request: ${(err as Error).message}`);
        return;
      }
      for (const l of this.#requestListeners) l(req);
    }
  }
}
