// Builders for local states in the nft backend tests: a readable default plus overrides.

import assert from "node:assert/strict";
import type { SyncReport } from "../../../../src/backend-core/sync-loop.ts";
import type { NftBackend } from "../../../../src/backends/nft/backend.ts";
import type { TableConfig } from "../../../../src/backends/nft/fragment.ts";
import {
  type LocalEndpoint,
  type LocalService,
  type LocalServicePort,
  type LocalState,
  splitServiceCIDRs,
  withFamilyEndpoints,
} from "../../../../src/model/local.ts";
import type { FakeNft } from "../../../support/fake-nft.ts";
import { type LocalServiceOverrides, localService } from "../../../support/local-service.ts";

export function ep(ip: string, port = 8080, over: Partial<LocalEndpoint> = {}): LocalEndpoint {
  return { ip, port, local: false, ready: true, serving: true, terminating: false, ...over };
}

export function port(over: Partial<LocalServicePort> = {}): LocalServicePort {
  const eps = over.internalEndpoints ?? [ep("198.51.100.2"), ep("198.51.100.3")];
  return withFamilyEndpoints({
    name: "http",
    protocol: "TCP",
    port: 80,
    nodePort: 0,
    hasEndpoints: eps.length > 0,
    endpointFamilies: eps.length > 0 ? ["IPv4"] : [],
    internalEndpoints: eps,
    externalEndpoints: eps,
    ...over,
  });
}

export function service(over: LocalServiceOverrides = {}): LocalService {
  return localService({ ports: [port()], ...over });
}

export function state(
  services: readonly LocalService[],
  revision = 1,
  serviceCIDRs: readonly string[] = [],
): LocalState {
  return {
    node: "node-1",
    revision,
    services: new Map(services.map((s) => [`${s.namespace}/${s.name}`, s])),
    serviceCIDRs: splitServiceCIDRs(serviceCIDRs),
  };
}

export const V4: TableConfig = {
  family: "ip",
  table: "kpng",
  nodePortCIDRs: ["192.0.2.1/32"],
  podCIDRs: ["10.244.0.0/16"],
  masqueradeAll: false,
  nodeIPs: ["192.0.2.1"],
};

export const V6: TableConfig = {
  family: "ip6",
  table: "kpng",
  nodePortCIDRs: ["2001:db8::1/128"],
  podCIDRs: ["2001:db8:244::/64"],
  masqueradeAll: false,
  nodeIPs: ["2001:db8::1"],
};

/** Many ClusterIP services with two endpoints each, for chunking and scale tests. */
export function manyServices(n: number): LocalService[] {
  const out: LocalService[] = [];
  for (let i = 0; i < n; i++) {
    const a = `${(i >> 8) & 255}.${i & 255}`;
    out.push(
      service({
        name: `svc-${i}`,
        clusterIPs: [`203.0.${a}`.replace(/^203\.0\.(\d+)\.(\d+)$/, "10.96.$1.$2")],
        ports: [port({ internalEndpoints: [ep(`10.1.${a}`), ep(`10.2.${a}`)] })],
      }),
    );
  }
  return out;
}

/**
 * One sync, with the transactions the fake nft received for it, in order (the report counts
 * them and keeps no text).
 */
export async function sent(
  nft: FakeNft,
  backend: NftBackend,
  s: LocalState,
): Promise<SyncReport & { readonly texts: readonly string[] }> {
  const from = nft.transactions.length;
  const report = await backend.sync(s);
  const texts = nft.transactions.slice(from);
  assert.equal(report.transactions, texts.length, "the report counts every transaction sent");
  assert.equal(report.bytes, Buffer.byteLength(texts.join("")));
  return { ...report, texts };
}
