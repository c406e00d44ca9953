// `/metrics` (the process registry, Prometheus text format) and `/proxyMode` (the backend's mode
// name, as kube-proxy answers it), on --metrics-bind-address.

import type { Server } from "node:http";
import { listen, sendMetrics } from "../observability/http-listen.ts";

export function startMetricsServer(host: string, port: number, proxyMode: string): Promise<Server> {
  return listen(host, port, (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/proxyMode") {
      res.writeHead(200, { "Content-Type": "text/plain; charset=utf-8" }).end(proxyMode);
      return;
    }
    if (path !== "/metrics") {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("404 page not found\n");
      return;
    }
    sendMetrics(res);
  });
}
