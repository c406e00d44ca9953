// The eBPF renderer, row by row as the Kubernetes docs state the behaviour: which frontends a
// Service gets, which endpoints serve them, and when they refuse or are left to nft (drop).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type RenderedGroup, renderService } from "../../../../src/backends/ebpf/render.ts";
import type { LocalService } from "../../../../src/model/local.ts";
import { ep, port, service } from "../nft/fixtures.ts";

const ctx = { nodePortIPs: { IPv4: ["192.0.2.1"], IPv6: ["2001:db8::1"] } };
const brief = (g: RenderedGroup) => ({
  name: g.name,
  frontends: g.frontends.map((f) => `${f.ip}:${f.port}/${f.protocol}`),
  backends: g.backends.map((b) => `${b.ip}:${b.port}`),
  reject: g.reject,
});

const rows: { what: string; svc: LocalService; want: ReturnType<typeof brief>[] }[] = [
  {
    what: "a ClusterIP Service: its cluster IP and port go to its endpoints",
    svc: service(),
    want: [
      {
        name: "TCP/80/IPv4/internal",
        frontends: ["203.0.113.10:80/TCP"],
        backends: ["198.51.100.2:8080", "198.51.100.3:8080"],
        reject: false,
      },
    ],
  },
  {
    what: "a Service without endpoints refuses connections",
    svc: service({ ports: [port({ internalEndpoints: [] })] }),
    want: [{ name: "TCP/80/IPv4/internal", frontends: ["203.0.113.10:80/TCP"], backends: [], reject: true }],
  },
  {
    what: "iTP Local without a local endpoint: left to nft, which drops",
    svc: service({
      internalTrafficPolicy: "Local",
      ports: [port({ internalEndpoints: [], endpointFamilies: ["IPv4"], hasEndpoints: true })],
    }),
    want: [],
  },
  {
    what: "a NodePort Service: the node's addresses with the node port, both families",
    svc: service({
      type: "NodePort",
      ports: [port({ nodePort: 30080 })],
    }),
    want: [
      {
        name: "TCP/80/IPv4/internal",
        frontends: ["203.0.113.10:80/TCP"],
        backends: ["198.51.100.2:8080", "198.51.100.3:8080"],
        reject: false,
      },
      {
        name: "TCP/80/IPv4/external",
        frontends: ["192.0.2.1:30080/TCP"],
        backends: ["198.51.100.2:8080", "198.51.100.3:8080"],
        reject: false,
      },
    ],
  },
  {
    what: "externalIPs and load-balancer IPs use the external endpoints",
    svc: service({
      type: "LoadBalancer",
      externalIPs: ["192.0.2.50"],
      loadBalancerIPs: ["192.0.2.60"],
      ports: [port({ externalEndpoints: [ep("198.51.100.9")] })],
    }),
    want: [
      {
        name: "TCP/80/IPv4/internal",
        frontends: ["203.0.113.10:80/TCP"],
        backends: ["198.51.100.2:8080", "198.51.100.3:8080"],
        reject: false,
      },
      {
        name: "TCP/80/IPv4/external",
        frontends: ["192.0.2.50:80/TCP", "192.0.2.60:80/TCP"],
        backends: ["198.51.100.9:8080"],
        reject: false,
      },
    ],
  },
  {
    what: "load-balancer IPs with source ranges are left to nft (it filters the source)",
    svc: service({ loadBalancerIPs: ["192.0.2.60"], sourceRanges: ["192.0.2.2/32"] }),
    want: [
      {
        name: "TCP/80/IPv4/internal",
        frontends: ["203.0.113.10:80/TCP"],
        backends: ["198.51.100.2:8080", "198.51.100.3:8080"],
        reject: false,
      },
    ],
  },
  {
    what: "source ranges of the other family only: this family's load-balancer IPs take every source",
    svc: service({
      clusterIPs: ["203.0.113.10", "2001:db8:2::10"],
      loadBalancerIPs: ["192.0.2.60", "2001:db8::60"],
      sourceRanges: ["2001:db8:9::/48"],
    }),
    want: [
      {
        name: "TCP/80/IPv4/internal",
        frontends: ["203.0.113.10:80/TCP"],
        backends: ["198.51.100.2:8080", "198.51.100.3:8080"],
        reject: false,
      },
      {
        name: "TCP/80/IPv4/external",
        frontends: ["192.0.2.60:80/TCP"],
        backends: ["198.51.100.2:8080", "198.51.100.3:8080"],
        reject: false,
      },
      // The IPv6 LB IP has ranges: nft filters it. No IPv6 endpoint: the cluster IP refuses.
      { name: "TCP/80/IPv6/internal", frontends: ["2001:db8:2::10:80/TCP"], backends: [], reject: true },
    ],
  },
  {
    what: "eTP Local: this node's own traffic may use every endpoint (known local)",
    svc: service({
      externalTrafficPolicy: "Local",
      externalIPs: ["192.0.2.50"],
      ports: [port({ externalEndpoints: [], endpointFamilies: ["IPv4"], hasEndpoints: true })],
    }),
    want: [
      {
        name: "TCP/80/IPv4/internal",
        frontends: ["203.0.113.10:80/TCP"],
        backends: ["198.51.100.2:8080", "198.51.100.3:8080"],
        reject: false,
      },
      {
        name: "TCP/80/IPv4/external",
        frontends: ["192.0.2.50:80/TCP"],
        backends: ["198.51.100.2:8080", "198.51.100.3:8080"],
        reject: false,
      },
    ],
  },
  {
    what: "dual stack: one group per family, each with that family's endpoints",
    svc: service({
      clusterIPs: ["203.0.113.10", "2001:db8:2::10"],
      ports: [
        port({
          internalEndpoints: [ep("198.51.100.2"), ep("2001:db8:1::2")],
          endpointFamilies: ["IPv4", "IPv6"],
        }),
      ],
    }),
    want: [
      {
        name: "TCP/80/IPv4/internal",
        frontends: ["203.0.113.10:80/TCP"],
        backends: ["198.51.100.2:8080"],
        reject: false,
      },
      {
        name: "TCP/80/IPv6/internal",
        frontends: ["2001:db8:2::10:80/TCP"],
        backends: ["2001:db8:1::2:8080"],
        reject: false,
      },
    ],
  },
  {
    what: "SCTP is left to nft (the socket hooks see TCP and UDP only)",
    svc: service({ ports: [port({ protocol: "SCTP" })] }),
    want: [],
  },
];

describe("eBPF renderer", () => {
  for (const row of rows) {
    test(row.what, () => {
      assert.deepEqual(renderService(row.svc, ctx).map(brief), row.want);
    });
  }

  test("ClientIP affinity carries its timeout", () => {
    const [g] = renderService(service({ sessionAffinitySeconds: 10800 }), ctx);
    assert.equal(g?.affinitySeconds, 10800);
  });

  test("terminating fallback: the endpoints the local model chose are the ones used", () => {
    const serving = ep("198.51.100.7", 8080, { ready: false, serving: true, terminating: true });
    const [g] = renderService(service({ ports: [port({ internalEndpoints: [serving] })] }), ctx);
    assert.deepEqual(
      g?.backends.map(({ ip, port }) => ({ ip, port })),
      [{ ip: "198.51.100.7", port: 8080 }],
    );
  });
});
