// Bounds on what clients of the node's HTTP servers (/healthz, /livez, /metrics, health check
// node ports) can take from kpng. Anyone who reaches a health port could otherwise hold file
// descriptors until kpng cannot start `nft`, or keep both cores busy with pipelined requests
// until a kubelet's own probe times out.
//
// - at most `maxConnections` open connections per server; one more is answered 503 and closed;
// - a connection silent for `idleMs` (before its first request or between requests) is closed,
//   and a request's headers must arrive within `headersMs`;
// - each connection gets `requestsPerSecond` requests a second; past that its socket is paused
//   until the next second, so one flooding client cannot starve the others (or a probe).

import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { counter } from "./metrics.ts";

export interface HttpLimits {
  readonly maxConnections: number;
  readonly idleMs: number;
  readonly headersMs: number;
  readonly requestsPerSecond: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  maxConnections: 128,
  idleMs: 10_000,
  headersMs: 5000,
  requestsPerSecond: 20,
};

const refused = counter(
  "kpng_http_connections_refused_total",
  "Connections to kpng's HTTP servers answered 503 and closed because the server was at its connection cap.",
);

const throttled = counter(
  "kpng_http_requests_throttled_total",
  "Times a connection used up its requests for the second and was paused.",
);

const BUSY =
  "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 20\r\nConnection: close\r\n\r\ntoo many connections";

/** Applies the limits to a server before it listens. */
export function limitServer(server: Server, limits: HttpLimits = DEFAULT_HTTP_LIMITS): void {
  server.headersTimeout = limits.headersMs;
  server.requestTimeout = limits.headersMs * 2;
  server.keepAliveTimeout = Math.min(server.keepAliveTimeout, limits.idleMs);
  // Node checks the header and request deadlines on this period (30 s by default).
  (server as Server & { connectionsCheckingInterval?: number }).connectionsCheckingInterval = 1000;
  // A connection that never sends a byte is covered by none of the above.
  server.timeout = limits.idleMs;
  server.on("timeout", (socket: Socket) => socket.destroy());

  const open = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    if (open.size >= limits.maxConnections) {
      refused.inc();
      socket.on("error", () => {});
      socket.end(BUSY);
      socket.destroySoon();
      return;
    }
    open.add(socket);
    socket.once("close", () => open.delete(socket));
  });
}

/**
 * The handler with a per-connection request budget: the request that uses up a second's budget
 * pauses the socket until the second is over; requests already read past it (pipelined in one
 * burst) are answered 503 and the connection is closed.
 */
export function limitRequests(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  limits: HttpLimits = DEFAULT_HTTP_LIMITS,
): (req: IncomingMessage, res: ServerResponse) => void {
  const budget = new WeakMap<Socket, { windowStart: number; count: number }>();
  return (req, res) => {
    const socket = req.socket;
    const now = performance.now();
    let b = budget.get(socket);
    if (b === undefined || now - b.windowStart >= 1000) {
      b = { windowStart: now, count: 0 };
      budget.set(socket, b);
    }
    b.count++;
    if (b.count > limits.requestsPerSecond) {
      res.shouldKeepAlive = false;
      res.writeHead(503, { "Content-Type": "text/plain", "Retry-After": "1", Connection: "close" });
      res.end("too many requests on this connection\n");
      return;
    }
    if (b.count === limits.requestsPerSecond) {
      throttled.inc();
      socket.pause();
      setTimeout(() => socket.resume(), Math.max(1, 1000 - (now - b.windowStart))).unref();
    }
    handler(req, res);
  };
}
