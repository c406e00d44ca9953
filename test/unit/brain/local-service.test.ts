import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { computeLocalService, type NodeView } from "../../../src/brain/local-service.ts";
import type { EndpointSlice, IPFamily, Service } from "../../../src/model/kube.ts";
import { acrossFamilies, clusterIPsOf, type LocalServiceFamily } from "../../../src/model/local.ts";
import { dualStack, endpointsOf, ep, slice, svc, THIS_NODE, terminating } from "./fixtures.ts";

interface Expect {
  readonly skipped?: true;
  readonly clusterIPs?: string[];
  readonly externalIPs?: string[];
  readonly loadBalancerIPs?: string[];
  readonly sourceRanges?: string[];
  /** The addresses as the model holds them: per family, primary first. */
  readonly addresses?: LocalServiceFamily[];
  readonly sessionAffinitySeconds?: number;
  readonly healthCheckNodePort?: number;
  readonly localReadyEndpoints?: number;
  readonly internal?: string[];
  readonly external?: string[];
  readonly hasEndpoints?: boolean;
  readonly families?: IPFamily[];
  /** Port index the endpoint expectations are about; 0 unless said. */
  readonly port?: number;
}

interface Row {
  readonly name: string;
  readonly service: Service;
  readonly slices?: readonly EndpointSlice[];
  readonly node?: NodeView;
  readonly expect: Expect;
}

const A = "203.0.113.1";
const B = "203.0.113.2";
const C = "203.0.113.3";
const D = "203.0.113.4";

const rows: Row[] = [
  // §1.1 which services are proxied
  {
    name: "headless service (clusterIP None) is skipped",
    service: svc({ clusterIP: "None", clusterIPs: ["None"] }),
    expect: { skipped: true },
  },
  {
    name: "headless service (clusterIP empty) is skipped",
    service: svc({ clusterIP: "", clusterIPs: [] }),
    expect: { skipped: true },
  },
  {
    name: "ExternalName service is skipped even with a cluster IP",
    service: svc({ type: "ExternalName" }),
    expect: { skipped: true },
  },
  {
    name: "service whose ipFamilies name no family with a cluster IP is skipped",
    service: svc({ clusterIPs: ["None"], clusterIP: "198.51.100.10", ipFamilies: ["IPv4"] }),
    expect: { skipped: true },
  },
  {
    name: "version skew: no ipFamilies, clusterIP used for its family",
    service: svc({ ipFamilies: [], clusterIPs: [] }),
    slices: [slice([ep(A)])],
    expect: { clusterIPs: ["198.51.100.10"], internal: [`${A}:8080`] },
  },
  {
    name: "version skew with an IPv6 clusterIP serves IPv6 only",
    service: svc({ clusterIP: "2001:db8::10", ipFamilies: [], clusterIPs: [] }),
    slices: [slice([ep(A)]), slice([ep("2001:db8::1")])],
    expect: { clusterIPs: ["2001:db8::10"], internal: ["[2001:db8::1]:8080"], families: ["IPv6"] },
  },
  {
    name: "dual-stack: cluster IPs primary family first",
    service: dualStack({
      clusterIP: "2001:db8::10",
      clusterIPs: ["2001:db8::10", "198.51.100.10"],
      ipFamilies: ["IPv6", "IPv4"],
    }),
    expect: { clusterIPs: ["2001:db8::10", "198.51.100.10"] },
  },
  {
    name: "dual-stack: each family holds its own addresses, canonical, primary family first",
    service: dualStack({
      type: "LoadBalancer",
      clusterIP: "2001:DB8:0::10",
      clusterIPs: ["2001:DB8:0::10", "198.51.100.10"],
      ipFamilies: ["IPv6", "IPv4"],
      externalIPs: ["192.0.2.5", "2001:db8:0:0::5"],
      loadBalancerIngress: [
        { ip: "2001:DB8::9", hostname: "", ipMode: undefined },
        { ip: "192.0.2.9", hostname: "", ipMode: undefined },
      ],
      loadBalancerSourceRanges: ["192.0.2.0/24"],
    }),
    expect: {
      addresses: [
        {
          family: "IPv6",
          clusterIP: "2001:db8::10",
          externalIPs: ["2001:db8::5"],
          loadBalancerIPs: ["2001:db8::9"],
          sourceRanges: [],
        },
        {
          family: "IPv4",
          clusterIP: "198.51.100.10",
          externalIPs: ["192.0.2.5"],
          loadBalancerIPs: ["192.0.2.9"],
          sourceRanges: ["192.0.2.0/24"],
        },
      ],
    },
  },
  // §1.2 per-port fields
  {
    name: "externalIPs split by family: only served families kept",
    service: svc({ externalIPs: ["192.0.2.5", "2001:db8::5"] }),
    expect: { externalIPs: ["192.0.2.5"] },
  },
  {
    name: "dual-stack externalIPs of both families kept",
    service: dualStack({ externalIPs: ["2001:db8::5", "192.0.2.5"] }),
    expect: { externalIPs: ["192.0.2.5", "2001:db8::5"] },
  },
  {
    name: "ipMode Proxy LB IP gets no rules",
    service: svc({
      type: "LoadBalancer",
      loadBalancerIngress: [
        { ip: "192.0.2.7", hostname: "", ipMode: "Proxy" },
        { ip: "192.0.2.8", hostname: "", ipMode: "VIP" },
        { ip: "192.0.2.9", hostname: "", ipMode: undefined },
      ],
    }),
    expect: { loadBalancerIPs: ["192.0.2.8", "192.0.2.9"] },
  },
  {
    name: "hostname-only LB ingress gives no LB IP",
    service: svc({
      type: "LoadBalancer",
      loadBalancerIngress: [{ ip: "", hostname: "lb.example", ipMode: undefined }],
    }),
    expect: { loadBalancerIPs: [] },
  },
  {
    name: "LB ingress IP of an unserved family is dropped",
    service: svc({
      type: "LoadBalancer",
      loadBalancerIngress: [{ ip: "2001:db8::7", hostname: "", ipMode: undefined }],
    }),
    expect: { loadBalancerIPs: [] },
  },
  {
    name: "source range with whitespace is trimmed and split by family",
    service: dualStack({
      type: "LoadBalancer",
      loadBalancerSourceRanges: [" 2001:db8::/48", "203.0.113.0/24 ", "\t192.0.2.0/25"],
    }),
    expect: { sourceRanges: ["203.0.113.0/24", "192.0.2.0/25", "2001:db8::/48"] },
  },
  {
    name: "source range host bits are cleared",
    service: svc({ loadBalancerSourceRanges: ["203.0.113.77/24"] }),
    expect: { sourceRanges: ["203.0.113.0/24"] },
  },
  {
    name: "a zero-length source range (0.0.0.0/0) allows any source of its family: no ranges",
    service: dualStack({
      type: "LoadBalancer",
      loadBalancerSourceRanges: ["203.0.113.0/24", "0.0.0.0/0", "2001:db8::/48"],
    }),
    expect: { sourceRanges: ["2001:db8::/48"] },
  },
  {
    name: "source ranges of an unserved family are dropped",
    service: svc({ loadBalancerSourceRanges: ["2001:db8::/48"] }),
    expect: { sourceRanges: [] },
  },
  {
    name: "ClientIP affinity timeout",
    service: svc({ sessionAffinity: "ClientIP", sessionAffinityTimeoutSeconds: 600 }),
    expect: { sessionAffinitySeconds: 600 },
  },
  {
    name: "affinity None gives 0 seconds",
    service: svc({ sessionAffinityTimeoutSeconds: 600 }),
    expect: { sessionAffinitySeconds: 0 },
  },
  {
    name: "healthCheckNodePort kept for LoadBalancer with eTP Local",
    service: svc({ type: "LoadBalancer", externalTrafficPolicy: "Local", healthCheckNodePort: 30999 }),
    expect: { healthCheckNodePort: 30999 },
  },
  {
    name: "healthCheckNodePort dropped for LoadBalancer with eTP Cluster",
    service: svc({ type: "LoadBalancer", healthCheckNodePort: 30999 }),
    expect: { healthCheckNodePort: 0 },
  },
  {
    name: "healthCheckNodePort dropped for NodePort with eTP Local",
    service: svc({ type: "NodePort", externalTrafficPolicy: "Local", healthCheckNodePort: 30999 }),
    expect: { healthCheckNodePort: 0 },
  },
  // §1.3 merge
  {
    name: "slice port matched by name and protocol",
    service: svc({
      ports: [
        { name: "dns", protocol: "UDP", port: 53 },
        { name: "dns-tcp", protocol: "TCP", port: 53 },
      ],
    }),
    slices: [
      slice([ep(A)], {
        ports: [
          { name: "dns", protocol: "TCP", port: 1053 },
          { name: "dns", protocol: "UDP", port: 5353 },
        ],
      }),
    ],
    expect: { internal: [`${A}:5353`] },
  },
  {
    name: "service port without a matching slice port has no endpoints",
    service: svc({
      ports: [
        { name: "dns", protocol: "UDP", port: 53 },
        { name: "dns-tcp", protocol: "TCP", port: 53 },
      ],
    }),
    slices: [slice([ep(A)], { ports: [{ name: "dns", protocol: "UDP", port: 5353 }] })],
    expect: { port: 1, internal: [], hasEndpoints: false, families: [] },
  },
  {
    name: "unnamed service port matches the unnamed slice port",
    service: svc({ ports: [{ name: "" }] }),
    slices: [slice([ep(A)], { ports: [{ name: "", protocol: "TCP", port: 9000 }] })],
    expect: { internal: [`${A}:9000`] },
  },
  {
    name: "slice port with null name is skipped",
    service: svc({ ports: [{ name: "" }] }),
    slices: [slice([ep(A)], { ports: [{ name: null, protocol: "TCP", port: 9000 }] })],
    expect: { internal: [], hasEndpoints: false },
  },
  {
    name: "slice port with null or 0 port is skipped",
    service: svc(),
    slices: [
      slice([ep(A)], {
        name: "s1",
        ports: [
          { name: "http", protocol: "TCP", port: null },
          { name: "http", protocol: "TCP", port: 0 },
        ],
      }),
    ],
    expect: { internal: [], hasEndpoints: false },
  },
  {
    name: "endpoint without addresses is skipped and only addresses[0] is used",
    service: svc(),
    slices: [slice([ep(A, { addresses: [] }), ep(B, { addresses: [B, C] })])],
    expect: { internal: [`${B}:8080`] },
  },
  {
    name: "nil conditions read as ready, serving, not terminating",
    service: svc(),
    slices: [slice([ep(A, { ready: null, serving: null, terminating: null })])],
    expect: { internal: [`${A}:8080`], hasEndpoints: true },
  },
  {
    name: "ready endpoint wins over terminating copy of the same ip:port",
    service: svc({ internalTrafficPolicy: "Local" }),
    slices: [
      slice([ep(A, { node: "n1" })], { name: "s-a" }),
      slice([terminating(A, { node: "n1" })], { name: "s-b" }),
    ],
    expect: { internal: [`${A}:8080 (local)`], localReadyEndpoints: 1 },
  },
  {
    name: "ready endpoint wins over a terminating copy listed after it in one slice",
    service: svc(),
    slices: [slice([terminating(A), ep(A)])],
    expect: { internal: [`${A}:8080`] },
  },
  {
    name: "endpoints from several slices are merged and sorted by ip then port",
    service: svc(),
    slices: [slice([ep(C), ep(A)], { name: "s1" }), slice([ep(B)], { name: "s2" })],
    expect: { internal: [`${A}:8080`, `${B}:8080`, `${C}:8080`] },
  },
  {
    name: "FQDN slices are ignored",
    service: svc(),
    slices: [slice([ep("db.example.com")], { addressType: "FQDN" })],
    expect: { internal: [], hasEndpoints: false },
  },
  {
    name: "an IPv6 slice does not feed an IPv4-only service",
    service: svc(),
    slices: [slice([ep("2001:db8::1")])],
    expect: { internal: [], hasEndpoints: false, families: [] },
  },
  // §1.4 categorize
  {
    name: "not-ready, not-serving endpoints are never used",
    service: svc(),
    slices: [slice([ep(A, { ready: false, serving: false, terminating: true })])],
    expect: { internal: [], hasEndpoints: false },
  },
  {
    name: "not-ready non-terminating endpoints are not a fallback",
    service: svc(),
    slices: [slice([ep(A, { ready: false, serving: true, terminating: false })])],
    expect: { internal: [], hasEndpoints: false },
  },
  {
    name: "ready endpoints preferred over serving+terminating ones",
    service: svc(),
    slices: [slice([ep(A), terminating(B)])],
    expect: { internal: [`${A}:8080`] },
  },
  {
    name: "all terminating: serving+terminating fallback used",
    service: svc(),
    slices: [
      slice([terminating(A), terminating(B), ep(C, { ready: false, serving: false, terminating: true })]),
    ],
    expect: { internal: [`${A}:8080`, `${B}:8080`], hasEndpoints: true },
  },
  {
    name: "topology: zone hints restrict cluster endpoints to this zone",
    service: svc(),
    slices: [slice([ep(A, { zoneHints: ["z1"] }), ep(B, { zoneHints: ["z2"] })])],
    expect: { internal: [`${A}:8080`] },
  },
  {
    name: "topology: zone hints used only when every ready endpoint is hinted",
    service: svc(),
    slices: [slice([ep(A, { zoneHints: ["z1"] }), ep(B)])],
    expect: { internal: [`${A}:8080`, `${B}:8080`] },
  },
  {
    name: "topology: unhinted terminating endpoints do not disable zone hints",
    service: svc(),
    slices: [slice([ep(A, { zoneHints: ["z1"] }), ep(B, { zoneHints: ["z2"] }), terminating(C)])],
    expect: { internal: [`${A}:8080`] },
  },
  {
    name: "topology: no hint for this zone disables filtering",
    service: svc(),
    slices: [slice([ep(A, { zoneHints: ["z2"] }), ep(B, { zoneHints: ["z3"] })])],
    expect: { internal: [`${A}:8080`, `${B}:8080`] },
  },
  {
    name: "topology: node without zone label never matches zone hints",
    service: svc(),
    node: { name: "n1", labels: {} },
    slices: [slice([ep(A, { zoneHints: ["z1"] }), ep(B, { zoneHints: ["z2"] })])],
    expect: { internal: [`${A}:8080`, `${B}:8080`] },
  },
  {
    name: "topology: node hints for this node win over zone hints",
    service: svc(),
    slices: [
      slice([
        ep(A, { node: "n1", nodeHints: ["n1"], zoneHints: ["z1"] }),
        ep(B, { nodeHints: ["n2"], zoneHints: ["z1"] }),
      ]),
    ],
    expect: { internal: [`${A}:8080 (local)`] },
  },
  {
    name: "topology: node hints not naming this node fall back to zone hints",
    service: svc(),
    slices: [
      slice([
        ep(A, { nodeHints: ["n3"], zoneHints: ["z1"] }),
        ep(B, { nodeHints: ["n2"], zoneHints: ["z2"] }),
      ]),
    ],
    expect: { internal: [`${A}:8080`] },
  },
  {
    name: "topology: node hints on only some endpoints are ignored",
    service: svc(),
    slices: [slice([ep(A, { node: "n1", nodeHints: ["n1"] }), ep(B)])],
    expect: { internal: [`${A}:8080 (local)`, `${B}:8080`] },
  },
  {
    name: "serving+terminating fallback ignores topology",
    service: svc(),
    slices: [slice([terminating(A, { zoneHints: ["z1"] }), terminating(B, { zoneHints: ["z2"] })])],
    expect: { internal: [`${A}:8080`, `${B}:8080`] },
  },
  {
    name: "iTP Local: ClusterIP traffic uses local endpoints only",
    service: svc({ internalTrafficPolicy: "Local" }),
    slices: [slice([ep(A, { node: "n1" }), ep(B)])],
    expect: { internal: [`${A}:8080 (local)`], hasEndpoints: true },
  },
  {
    name: "iTP Local with no local endpoints: internalEndpoints empty, hasEndpoints true",
    service: svc({ internalTrafficPolicy: "Local" }),
    slices: [slice([ep(A), ep(B)])],
    expect: { internal: [], hasEndpoints: true, families: ["IPv4"] },
  },
  {
    name: "iTP Local ignores topology hints",
    service: svc({ internalTrafficPolicy: "Local" }),
    slices: [slice([ep(A, { node: "n1", zoneHints: ["z2"] }), ep(B, { zoneHints: ["z1"] })])],
    expect: { internal: [`${A}:8080 (local)`] },
  },
  {
    name: "iTP Local: local serving+terminating fallback when no local ready",
    service: svc({ internalTrafficPolicy: "Local" }),
    slices: [slice([terminating(A, { node: "n1" }), ep(B)])],
    expect: { internal: [`${A}:8080 (local)`], localReadyEndpoints: 0 },
  },
  {
    name: "iTP Local: local ready preferred over local terminating",
    service: svc({ internalTrafficPolicy: "Local" }),
    slices: [slice([terminating(A, { node: "n1" }), ep(B, { node: "n1" })])],
    expect: { internal: [`${B}:8080 (local)`] },
  },
  {
    name: "iTP Local without external access: no externalEndpoints",
    service: svc({ internalTrafficPolicy: "Local" }),
    slices: [slice([ep(A, { node: "n1" })])],
    expect: { external: [] },
  },
  {
    name: "ClusterIP service without external access: externalEndpoints empty",
    service: svc(),
    slices: [slice([ep(A)])],
    expect: { internal: [`${A}:8080`], external: [] },
  },
  {
    name: "NodePort eTP Cluster: external traffic uses cluster endpoints",
    service: svc({ type: "NodePort", ports: [{ nodePort: 30080 }] }),
    slices: [slice([ep(A), ep(B, { node: "n1" })])],
    expect: { external: [`${A}:8080`, `${B}:8080 (local)`] },
  },
  {
    name: "NodePort eTP Local: external traffic uses local endpoints, internal uses cluster",
    service: svc({ type: "NodePort", externalTrafficPolicy: "Local", ports: [{ nodePort: 30080 }] }),
    slices: [slice([ep(A), ep(B, { node: "n1" })])],
    expect: { internal: [`${A}:8080`, `${B}:8080 (local)`], external: [`${B}:8080 (local)`] },
  },
  {
    name: "eTP Local with no local endpoints: externalEndpoints empty, hasEndpoints true",
    service: svc({ type: "NodePort", externalTrafficPolicy: "Local", ports: [{ nodePort: 30080 }] }),
    slices: [slice([ep(A), ep(B)])],
    expect: { external: [], internal: [`${A}:8080`, `${B}:8080`], hasEndpoints: true },
  },
  {
    name: "eTP Local: local serving+terminating fallback for external traffic",
    service: svc({ type: "NodePort", externalTrafficPolicy: "Local", ports: [{ nodePort: 30080 }] }),
    slices: [slice([terminating(A, { node: "n1" }), ep(B)])],
    expect: { external: [`${A}:8080 (local)`], internal: [`${B}:8080`] },
  },
  {
    name: "eTP Local on a ClusterIP service without external IPs changes nothing",
    service: svc({ externalTrafficPolicy: "Local" }),
    slices: [slice([ep(A), ep(B, { node: "n1" })])],
    expect: { internal: [`${A}:8080`, `${B}:8080 (local)`], external: [] },
  },
  {
    name: "externalIP makes a ClusterIP service externally accessible with eTP Local",
    service: svc({ externalTrafficPolicy: "Local", externalIPs: ["192.0.2.5"] }),
    slices: [slice([ep(A), ep(B, { node: "n1" })])],
    expect: { external: [`${B}:8080 (local)`], internal: [`${A}:8080`, `${B}:8080 (local)`] },
  },
  {
    name: "LoadBalancer eTP Local without node port but with a VIP uses local endpoints",
    service: svc({
      type: "LoadBalancer",
      externalTrafficPolicy: "Local",
      loadBalancerIngress: [{ ip: "192.0.2.9", hostname: "", ipMode: "VIP" }],
    }),
    slices: [slice([ep(A), ep(B, { node: "n1" })])],
    expect: { external: [`${B}:8080 (local)`] },
  },
  {
    name: "LoadBalancer port with no node port and only a Proxy-mode IP is not externally accessible",
    service: svc({
      type: "LoadBalancer",
      externalTrafficPolicy: "Local",
      loadBalancerIngress: [{ ip: "192.0.2.9", hostname: "", ipMode: "Proxy" }],
    }),
    slices: [slice([ep(A), ep(B, { node: "n1" })])],
    expect: { external: [], internal: [`${A}:8080`, `${B}:8080 (local)`] },
  },
  {
    name: "iTP Local and eTP Local: both traffic kinds use local endpoints",
    service: svc({
      type: "NodePort",
      internalTrafficPolicy: "Local",
      externalTrafficPolicy: "Local",
      ports: [{ nodePort: 30080 }],
    }),
    slices: [slice([ep(A), ep(B, { node: "n1" })])],
    expect: { internal: [`${B}:8080 (local)`], external: [`${B}:8080 (local)`] },
  },
  {
    name: "iTP Local with eTP Cluster NodePort: external traffic uses cluster endpoints",
    service: svc({ type: "NodePort", internalTrafficPolicy: "Local", ports: [{ nodePort: 30080 }] }),
    slices: [slice([ep(A), ep(B, { node: "n1" })])],
    expect: { internal: [`${B}:8080 (local)`], external: [`${A}:8080`, `${B}:8080 (local)`] },
  },
  {
    name: "no endpoints at all: hasEndpoints false (reject)",
    service: svc({ type: "NodePort", ports: [{ nodePort: 30080 }] }),
    slices: [],
    expect: { internal: [], external: [], hasEndpoints: false, families: [] },
  },
  {
    name: "only terminating endpoints that are not serving: hasEndpoints false",
    service: svc({ internalTrafficPolicy: "Local" }),
    slices: [slice([ep(A, { ready: false, serving: false, terminating: true })])],
    expect: { hasEndpoints: false },
  },
  {
    name: "localReadyEndpoints counts unique local ready IPs over all ports",
    service: svc({ ports: [{ name: "http" }, { name: "https", port: 443 }] }),
    slices: [
      slice([ep(A, { node: "n1" }), ep(B, { node: "n1" }), ep(C), terminating(D, { node: "n1" })], {
        ports: [
          { name: "http", protocol: "TCP", port: 8080 },
          { name: "https", protocol: "TCP", port: 8443 },
        ],
      }),
    ],
    expect: { localReadyEndpoints: 2 },
  },
  {
    name: "local endpoint with no node name never counts as local",
    service: svc({ internalTrafficPolicy: "Local" }),
    node: { name: "", labels: {} },
    slices: [slice([ep(A, { node: "" })])],
    expect: { internal: [], localReadyEndpoints: 0 },
  },
  // §1.6 dual-stack
  {
    name: "dual-stack: IPv4 all terminating uses fallback while IPv6 has ready",
    service: dualStack(),
    slices: [
      slice([terminating(A), ep(B, { ready: false, serving: false, terminating: true })]),
      slice([ep("2001:db8::1"), terminating("2001:db8::2")]),
    ],
    expect: { internal: [`${A}:8080`, "[2001:db8::1]:8080"], families: ["IPv4", "IPv6"] },
  },
  {
    name: "dual-stack: endpoints of both families concatenated and sorted",
    service: dualStack(),
    slices: [slice([ep("2001:db8::2"), ep("2001:db8::1")]), slice([ep(B), ep(A)])],
    expect: { internal: [`${A}:8080`, `${B}:8080`, "[2001:db8::1]:8080", "[2001:db8::2]:8080"] },
  },
  {
    name: "dual-stack: a family without endpoints is missing from endpointFamilies",
    service: dualStack(),
    slices: [slice([ep("2001:db8::1")])],
    expect: { families: ["IPv6"], hasEndpoints: true },
  },
  {
    name: "dual-stack: topology decided per family",
    service: dualStack(),
    slices: [
      slice([ep(A, { zoneHints: ["z1"] }), ep(B, { zoneHints: ["z2"] })]),
      slice([ep("2001:db8::1", { zoneHints: ["z1"] }), ep("2001:db8::2")]),
    ],
    expect: { internal: [`${A}:8080`, "[2001:db8::1]:8080", "[2001:db8::2]:8080"] },
  },
  {
    name: "dual-stack eTP Local: externalIP of one family makes only that family external (with node port 0)",
    service: dualStack({ externalTrafficPolicy: "Local", externalIPs: ["192.0.2.5"] }),
    slices: [
      slice([ep(A, { node: "n1" }), ep(B)]),
      slice([ep("2001:db8::1", { node: "n1" }), ep("2001:db8::2")]),
    ],
    expect: {
      internal: [`${A}:8080 (local)`, `${B}:8080`, "[2001:db8::1]:8080 (local)", "[2001:db8::2]:8080"],
      external: [`${A}:8080 (local)`],
    },
  },
];

function check(row: Row): void {
  const local = computeLocalService(row.service, row.slices ?? [], row.node ?? THIS_NODE);
  const e = row.expect;
  if (e.skipped) {
    assert.equal(local, undefined);
    return;
  }
  assert.ok(local, "service should not be skipped");
  const port = e.port ?? 0;
  if (e.clusterIPs) assert.deepEqual(clusterIPsOf(local), e.clusterIPs);
  if (e.externalIPs) assert.deepEqual(acrossFamilies(local, "externalIPs"), e.externalIPs);
  if (e.loadBalancerIPs) assert.deepEqual(acrossFamilies(local, "loadBalancerIPs"), e.loadBalancerIPs);
  if (e.sourceRanges) assert.deepEqual(acrossFamilies(local, "sourceRanges"), e.sourceRanges);
  if (e.addresses) assert.deepEqual(local.families, e.addresses);
  if (e.sessionAffinitySeconds !== undefined)
    assert.equal(local.sessionAffinitySeconds, e.sessionAffinitySeconds);
  if (e.healthCheckNodePort !== undefined) assert.equal(local.healthCheckNodePort, e.healthCheckNodePort);
  if (e.localReadyEndpoints !== undefined) assert.equal(local.localReadyEndpoints, e.localReadyEndpoints);
  if (e.internal) assert.deepEqual(endpointsOf(local, "internal", port), e.internal, "internalEndpoints");
  if (e.external) assert.deepEqual(endpointsOf(local, "external", port), e.external, "externalEndpoints");
  if (e.hasEndpoints !== undefined)
    assert.equal(local.ports[port]?.hasEndpoints, e.hasEndpoints, "hasEndpoints");
  if (e.families) assert.deepEqual(local.ports[port]?.endpointFamilies, e.families, "endpointFamilies");
}

describe("computeLocalService", () => {
  for (const row of rows) test(row.name, () => check(row));

  test("service fields copied: name, type, policies, ports", () => {
    const local = computeLocalService(
      svc({
        type: "NodePort",
        externalTrafficPolicy: "Local",
        ports: [{ name: "x", protocol: "SCTP", port: 9, nodePort: 30009 }],
      }),
      [],
      THIS_NODE,
    );
    assert.ok(local);
    assert.equal(local.namespace, "ns");
    assert.equal(local.name, "web");
    assert.equal(local.type, "NodePort");
    assert.equal(local.externalTrafficPolicy, "Local");
    assert.equal(local.internalTrafficPolicy, "Cluster");
    assert.deepEqual(
      local.ports.map((p) => [p.name, p.protocol, p.port, p.nodePort]),
      [["x", "SCTP", 9, 30009]],
    );
  });

  test("endpoint conditions are passed to backends", () => {
    const local = computeLocalService(svc(), [slice([terminating(A, { node: "n1" })])], THIS_NODE);
    assert.deepEqual(
      // As JSON shows it: the brain's endpoints hold their flags in one field.
      JSON.parse(JSON.stringify(local?.ports[0]?.internalEndpoints)),
      [{ ip: A, port: 8080, local: true, ready: false, serving: true, terminating: true }],
    );
  });
});

describe("endpoints whose node is unknown", () => {
  test("are marked nodeUnknown (they may run here), never local; the others carry no mark", () => {
    const computed = computeLocalService(
      svc(),
      [slice([ep("10.0.0.1", { node: "" }), ep("10.0.0.2", { node: THIS_NODE.name }), ep("10.0.0.3")])],
      THIS_NODE,
    );
    assert.deepEqual(
      computed?.ports[0]?.internalEndpoints.map((e) => [e.ip, e.local, e.nodeUnknown]),
      [
        ["10.0.0.1", false, true],
        ["10.0.0.2", true, undefined],
        ["10.0.0.3", false, undefined],
      ],
    );
  });
});
