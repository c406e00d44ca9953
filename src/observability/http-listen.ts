// Starts and stops the process's small HTTP servers (the node's health and metrics servers, the
// healthCheckNodePorts, a controller's status server). Listening is awaited so that a port that
// is taken is an error the caller sees, not an unhandled event.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { DEFAULT_HTTP_LIMITS, type HttpLimits, limitRequests, limitServer } from "./http-limits.ts";
import { registry } from "./metrics.ts";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** Idle keep-alive connections are dropped quickly: probes open many, and close() waits for them. */
const KEEP_ALIVE_MS = 5000;

export function listen(
  host: string,
  port: number,
  handler: Handler,
  limits: HttpLimits = DEFAULT_HTTP_LIMITS,
): Promise<Server> {
  const server = createServer(limitRequests(handler, limits));
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  limitServer(server, limits);
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once("error", onError);
    server.listen({ host, port, exclusive: true }, () => {
      server.off("error", onError);
      resolve(server);
    });
  });
}

/** Stops accepting, drops open connections, resolves once closed. */
export function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    "Content-Type": "application/json",
    "X-Content-Type-Options": "nosniff",
    ...headers,
  });
  res.end(body);
}

/** /metrics: the process registry in Prometheus text format. */
export function sendMetrics(res: ServerResponse): void {
  registry.metrics().then(
    (text) => res.writeHead(200, { "Content-Type": registry.contentType }).end(text),
    (err: unknown) => res.writeHead(500, { "Content-Type": "text/plain" }).end(String(err)),
  );
}
