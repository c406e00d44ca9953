// One /healthz and one /metrics server per address in a process, shared by every backend in it
// (`to-local to-nft … to-iptables --service-proxy-name legacy …`): /healthz is healthy only when
// every backend keeps up, and the server closes when its last backend leaves.

import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { IPFamily } from "../model/kube.ts";
import { close } from "../observability/http-listen.ts";
import { startHealthServer } from "./health-server.ts";
import { startMetricsServer } from "./metrics-server.ts";
import type { HealthSnapshot } from "./proxy-health.ts";

interface HealthSource {
  snapshot(): HealthSnapshot;
}

/** What a backend holds of a shared server: leaving closes it once nobody else uses it. */
export interface SharedServer {
  /** Where the server listens (the port chosen when asked for port 0). */
  readonly address: AddressInfo;
  leave(): Promise<void>;
}

interface Entry<M> {
  readonly server: Promise<Server>;
  readonly members: Set<M>;
}

const healthServers = new Map<string, Entry<HealthSource>>();
const metricsServers = new Map<string, Entry<{ readonly mode: string }>>();

/** Every backend's health as one: healthy and eligible only if all are; a family unhealthy if any says so. */
export function combinedSnapshot(snapshots: readonly HealthSnapshot[]): HealthSnapshot {
  const families = new Map<IPFamily, { lastUpdated: number | undefined; healthy: boolean }>();
  let lastUpdated: number | undefined;
  for (const s of snapshots) {
    for (const [family, f] of s.families) {
      const seen = families.get(family);
      families.set(family, {
        // The oldest sync of the family: the backend that lags behind.
        lastUpdated:
          seen === undefined
            ? f.lastUpdated
            : seen.lastUpdated === undefined || f.lastUpdated === undefined
              ? undefined
              : Math.min(seen.lastUpdated, f.lastUpdated),
        healthy: (seen?.healthy ?? true) && f.healthy,
      });
    }
    if (s.lastUpdated !== undefined && (lastUpdated === undefined || s.lastUpdated < lastUpdated))
      lastUpdated = s.lastUpdated;
  }
  return {
    healthy: snapshots.every((s) => s.healthy),
    nodeEligible: snapshots.every((s) => s.nodeEligible),
    lastUpdated: snapshots.some((s) => s.lastUpdated === undefined) ? undefined : lastUpdated,
    now: Math.max(0, ...snapshots.map((s) => s.now)),
    families,
  };
}

async function join<M>(
  servers: Map<string, Entry<M>>,
  key: string,
  member: M,
  start: (members: Set<M>) => Promise<Server>,
): Promise<SharedServer> {
  let entry = servers.get(key);
  if (entry === undefined) {
    const members = new Set<M>();
    const created: Entry<M> = { members, server: start(members) };
    entry = created;
    servers.set(key, created);
    created.server.catch(() => {
      if (servers.get(key) === created) servers.delete(key);
    });
  }
  const joined = entry;
  joined.members.add(member);
  let server: Server;
  try {
    server = await joined.server;
  } catch (err) {
    joined.members.delete(member);
    throw err;
  }
  return {
    address: server.address() as AddressInfo,
    async leave() {
      if (!joined.members.delete(member) || joined.members.size > 0) return;
      if (servers.get(key) === joined) servers.delete(key);
      await close(await joined.server);
    },
  };
}

export function shareHealthServer(host: string, port: number, health: HealthSource): Promise<SharedServer> {
  return join(healthServers, `${host}:${port}`, health, (members) =>
    startHealthServer(host, port, {
      snapshot: () => combinedSnapshot([...members].map((m) => m.snapshot())),
    }),
  );
}

/** /proxyMode answers the mode of the first backend that joined. */
export function shareMetricsServer(host: string, port: number, mode: string): Promise<SharedServer> {
  // One object per backend: two backends of the same mode are two members.
  return join(metricsServers, `${host}:${port}`, { mode }, (members) =>
    startMetricsServer(host, port, () => ([...members][0] ?? { mode }).mode),
  );
}
