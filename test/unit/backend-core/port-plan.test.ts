// The port plan, row by row as the Kubernetes Service documentation states the behaviour. Each
// row builds one Service (in the local model's terms), plans it for one family and checks the
// decisions a backend then writes down.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { NodeAddresses } from "../../../src/backend-core/family-settings.ts";
import { type PortPlan, planService } from "../../../src/backend-core/port-plan.ts";
import type { IPFamily } from "../../../src/model/kube.ts";
import type { LocalService } from "../../../src/model/local.ts";
import { ep, port, service } from "../backends/nft/fixtures.ts";

/** The node's addresses, per family as `familySettings` splits them. */
const NODE: Readonly<Record<IPFamily, NodeAddresses>> = {
  IPv4: {
    nodePortCIDRs: ["192.0.2.1/32"],
    podCIDRs: ["10.244.0.0/16"],
    masqueradeAll: false,
    nodeIPs: ["192.0.2.1"],
  },
  IPv6: {
    nodePortCIDRs: ["2001:db8::1/128"],
    podCIDRs: ["2001:db8:244::/64"],
    masqueradeAll: false,
    nodeIPs: ["2001:db8::1"],
  },
};

const local = ep("198.51.100.2", 8080, { local: true });
const remote = ep("198.51.100.3");
const v6 = ep("2001:db8:1::2");

interface Row {
  readonly docs: string;
  readonly svc: LocalService;
  readonly family?: IPFamily;
  readonly node?: Partial<NodeAddresses>;
  readonly expect: { readonly [K in keyof PortPlan]?: unknown };
}

function ipPort(ep: unknown): unknown {
  return typeof ep === "object" && ep !== null && "ip" in ep && "port" in ep
    ? { ip: ep.ip, port: ep.port }
    : ep;
}

function plan(row: Pick<Row, "svc" | "family" | "node">): PortPlan {
  const family = row.family ?? "IPv4";
  const p = planService(row.svc, family, { ...NODE[family], ...row.node })?.ports[0];
  assert.ok(p, "the service is planned in this family");
  return p;
}

const ROWS: readonly Row[] = [
  {
    docs: "a ClusterIP Service balances over its ready endpoints; traffic keeps the port's identity",
    svc: service(),
    expect: {
      id: "default/web/tcp/80",
      label: "default/web:http",
      protocol: "tcp",
      clusterIP: "203.0.113.10",
      internal: [
        { ip: "198.51.100.2", port: 8080 },
        { ip: "198.51.100.3", port: 8080 },
      ],
      noEndpoints: "drop",
      nodePort: 0,
    },
  },
  {
    docs: "a Service without endpoints rejects its traffic (ICMP port unreachable)",
    svc: service({ ports: [port({ internalEndpoints: [] })] }),
    expect: { internal: [], external: [], noEndpoints: "reject", servesExternal: false },
  },
  {
    docs: "internalTrafficPolicy Local with no local endpoint drops ClusterIP traffic (endpoints exist elsewhere)",
    svc: service({
      internalTrafficPolicy: "Local",
      ports: [
        port({
          internalEndpoints: [],
          externalEndpoints: [remote],
          endpointFamilies: ["IPv4"],
        }),
      ],
    }),
    expect: { internal: [], noEndpoints: "drop" },
  },
  {
    docs: "a NodePort Service takes traffic on the node port of the addresses --nodeport-addresses selects",
    svc: service({ type: "NodePort", ports: [port({ nodePort: 30080 })] }),
    expect: { nodePort: 30080, servesExternal: true, masqueradeExternal: true, shortCircuit: false },
  },
  {
    docs: "with no NodePort addresses in the family, the node port takes no traffic there",
    svc: service({ type: "NodePort", ports: [port({ nodePort: 30080 })] }),
    node: { nodePortCIDRs: [] },
    expect: { nodePort: 0 },
  },
  {
    docs: "externalTrafficPolicy Cluster masquerades external traffic and spreads it over all endpoints",
    svc: service({
      type: "LoadBalancer",
      loadBalancerIPs: ["203.0.113.200"],
      externalIPs: ["203.0.113.100"],
    }),
    expect: {
      loadBalancerIPs: ["203.0.113.200"],
      externalIPs: ["203.0.113.100"],
      masqueradeExternal: true,
      externalSameAsInternal: true,
    },
  },
  {
    docs: "externalTrafficPolicy Local keeps the client IP and short-circuits pods and the node to the cluster endpoints",
    svc: service({
      type: "LoadBalancer",
      externalTrafficPolicy: "Local",
      loadBalancerIPs: ["203.0.113.200"],
      ports: [
        port({
          nodePort: 30080,
          internalEndpoints: [local, remote],
          externalEndpoints: [local],
        }),
      ],
    }),
    expect: {
      masqueradeExternal: false,
      shortCircuit: true,
      servesExternal: true,
      external: [{ ip: "198.51.100.2", port: 8080 }],
      externalSameAsInternal: false,
    },
  },
  {
    docs: "externalTrafficPolicy Local on a node without a local endpoint drops external traffic",
    svc: service({
      type: "NodePort",
      externalTrafficPolicy: "Local",
      ports: [port({ nodePort: 30080, internalEndpoints: [remote], externalEndpoints: [] })],
    }),
    expect: { external: [], noEndpoints: "drop", servesExternal: true, shortCircuit: true },
  },
  {
    docs: "externalTrafficPolicy Cluster with no endpoint in the family rejects external traffic",
    svc: service({
      type: "NodePort",
      ports: [port({ nodePort: 30080, internalEndpoints: [] })],
    }),
    expect: { servesExternal: false, noEndpoints: "reject" },
  },
  {
    docs: "loadBalancerSourceRanges allow only the listed sources of the family",
    svc: service({
      type: "LoadBalancer",
      loadBalancerIPs: ["203.0.113.200"],
      sourceRanges: ["198.51.100.0/24", "2001:db8:9::/48"],
    }),
    expect: { allowList: { sourceRanges: ["198.51.100.0/24"], loadBalancerIPs: [] } },
  },
  {
    docs: "a source range that holds a node IP lets the node reach its own load-balancer IP",
    svc: service({
      type: "LoadBalancer",
      loadBalancerIPs: ["203.0.113.200"],
      sourceRanges: ["192.0.2.0/24"],
    }),
    expect: { allowList: { sourceRanges: ["192.0.2.0/24"], loadBalancerIPs: ["203.0.113.200"] } },
  },
  {
    docs: "source ranges of the other family only leave this family open to every source",
    svc: service({
      type: "LoadBalancer",
      clusterIPs: ["203.0.113.10", "2001:db8:2::10"],
      loadBalancerIPs: ["203.0.113.200"],
      sourceRanges: ["2001:db8:9::/48"],
    }),
    expect: { allowList: undefined },
  },
  {
    docs: "source ranges without a load-balancer IP in the family check nothing",
    svc: service({ type: "LoadBalancer", sourceRanges: ["198.51.100.0/24"] }),
    expect: { allowList: undefined },
  },
  {
    docs: "sessionAffinity ClientIP keeps a client on one endpoint for timeoutSeconds",
    svc: service({ sessionAffinitySeconds: 10800 }),
    expect: { affinitySeconds: 10800 },
  },
  {
    docs: "ClusterIP traffic from outside the pod CIDRs is masqueraded; --masquerade-all masquerades all of it",
    svc: service(),
    node: { masqueradeAll: true },
    expect: { clusterMasquerade: "all" },
  },
  {
    docs: "without pod CIDRs nothing tells pods apart, so ClusterIP traffic is not masqueraded",
    svc: service(),
    node: { podCIDRs: [] },
    expect: { clusterMasquerade: "none" },
  },
  {
    docs: "dual stack: the IPv6 family sees the IPv6 ClusterIP and endpoints only",
    svc: service({
      clusterIPs: ["203.0.113.10", "2001:db8:2::10"],
      loadBalancerIPs: ["203.0.113.200", "2001:db8:2::c8"],
      ports: [port({ internalEndpoints: [remote, v6], endpointFamilies: ["IPv4", "IPv6"] })],
    }),
    family: "IPv6",
    expect: {
      clusterIP: "2001:db8:2::10",
      loadBalancerIPs: ["2001:db8:2::c8"],
      internal: [{ ip: "2001:db8:1::2", port: 8080 }],
      noEndpoints: "drop",
    },
  },
  {
    docs: "dual stack: a family whose endpoints are all gone rejects although the other family has some",
    svc: service({ clusterIPs: ["203.0.113.10", "2001:db8:2::10"] }),
    family: "IPv6",
    expect: { internal: [], noEndpoints: "reject" },
  },
];

describe("port plan", () => {
  for (const row of ROWS) {
    test(row.docs, () => {
      const p = plan(row);
      for (const [key, want] of Object.entries(row.expect)) {
        const got = p[key as keyof PortPlan];
        // Endpoints compare as the kernel sees them: address and port.
        const seen = Array.isArray(got) ? got.map(ipPort) : got;
        assert.deepEqual(seen, want, key);
      }
    });
  }

  test("a family in which the Service has no ClusterIP carries nothing of it (as kube-proxy)", () => {
    assert.equal(planService(service(), "IPv6", NODE.IPv6), undefined);
  });

  test("an ExternalName Service is no proxy's business", () => {
    assert.equal(planService(service({ type: "ExternalName" }), "IPv4", NODE.IPv4), undefined);
  });
});
