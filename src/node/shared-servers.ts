// One /healthz and one /metrics server per address in a process, shared by every backend in it
// (`to-local to-nft … to-iptables --service-proxy-name legacy …`): /healthz is healthy only when
// every backend keeps up, and the server closes when its last backend leaves.

import type { IPFamily } from "../model/kube.ts";
import type { HealthSnapshot } from "./proxy-health.ts";

interface HealthSource {
  snapshot(): HealthSnapshot;
}

/** A listening server, however it was opened (RetryingServer keeps trying a taken port). */
interface Closable {
  close(): Promise<void>;
}

/** What a backend holds of a shared server: leaving closes it once nobody else uses it. */
export interface SharedServer<S extends Closable = Closable> {
  readonly server: S;
  leave(): Promise<void>;
}

interface Entry<M> {
  readonly server: Promise<Closable>;
  readonly members: Set<M>;
}

const healthServers = new Map<string, Entry<HealthSource>>();
const metricsServers = new Map<string, Entry<string>>();

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

async function join<M, S extends Closable>(
  servers: Map<string, Entry<M>>,
  key: string,
  member: M,
  start: (members: Set<M>) => Promise<S>,
): Promise<SharedServer<S>> {
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
  let server: S;
  try {
    server = (await joined.server) as S;
  } catch (err) {
    joined.members.delete(member);
    throw err;
  }
  return {
    server,
    async leave() {
      if (!joined.members.delete(member) || joined.members.size > 0) return;
      if (servers.get(key) === joined) servers.delete(key);
      await server.close();
    },
  };
}

/** Joins the /healthz server at `address`, opening it with `open` (over every member's health) if none is. */
export function shareHealthServer<S extends Closable>(
  address: string,
  health: HealthSource,
  open: (combined: HealthSource) => Promise<S>,
): Promise<SharedServer<S>> {
  return join(healthServers, address, health, (members) =>
    open({ snapshot: () => combinedSnapshot([...members].map((m) => m.snapshot())) }),
  );
}

/** Joins the /metrics server at `address` (the registry is the process's), opening it if none is. */
export function shareMetricsServer<S extends Closable>(
  address: string,
  open: () => Promise<S>,
): Promise<SharedServer<S>> {
  // One member per backend, even of the same mode.
  return join(metricsServers, address, `${Math.random()}`, () => open());
}
