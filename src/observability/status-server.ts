// /metrics (Prometheus) and /healthz for a process without node servers (a controller, the
// to-api brain), on 127.0.0.1 unless told otherwise.

import type { Server } from "node:http";
import { type HostPort, splitHostPort } from "../lib/host-port.ts";
import { listen, sendMetrics } from "../observability/http-listen.ts";

/** "host:port", "[v6]:port" or ":port" (127.0.0.1); throws with the accepted forms otherwise. */
export function parseStatusAddress(text: string): HostPort {
  const address = splitHostPort(text);
  if (address === undefined)
    throw new Error(`"${text}" is not host:port (e.g. 127.0.0.1:10260, [::1]:10260, :10260)`);
  return { host: address.host || "127.0.0.1", port: address.port };
}

export function startStatusServer(address: HostPort, healthy: () => boolean): Promise<Server> {
  return listen(address.host, address.port, (req, res) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    if (path === "/healthz") {
      const ok = healthy();
      res.writeHead(ok ? 200 : 503, { "Content-Type": "text/plain" }).end(ok ? "ok\n" : "not synced\n");
      return;
    }
    if (path === "/metrics") {
      sendMetrics(res);
      return;
    }
    res.writeHead(404).end();
  });
}
