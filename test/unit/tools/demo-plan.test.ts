import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { planDemo, readClusterFile } from "../../../tools/demo/demo-plan.ts";

const NODE = `
apiVersion: v1
kind: Node
metadata: { name: node-1 }
status:
  addresses:
    - { type: InternalIP, address: 192.0.2.11 }
    - { type: InternalIP, address: "2001:db8::11" }
    - { type: Hostname, address: node-1 }
`;

function service(name: string, spec: string, extra = ""): string {
  return `---
apiVersion: v1
kind: Service
metadata: { name: ${name}${extra} }
spec: ${spec}
`;
}

describe("planDemo: requests per Service", () => {
  const cases: { name: string; yaml: string; want: string[] }[] = [
    {
      name: "a ClusterIP port is asked from the client pod, once per cluster IP",
      yaml: service(
        "web",
        `{ clusterIP: 203.0.113.10, clusterIPs: [203.0.113.10, "2001:db8:2::10"], ports: [{ name: http, port: 80 }] }`,
      ),
      want: [
        "default/web:http ClusterIP client tcp 203.0.113.10:80",
        "default/web:http ClusterIP client tcp 2001:db8:2::10:80",
      ],
    },
    {
      name: "a NodePort is asked from outside on the node IP of each family the Service has",
      yaml: service(
        "np",
        `{ type: NodePort, clusterIP: 203.0.113.11, ports: [{ port: 80, nodePort: 30080 }] }`,
      ),
      want: [
        "default/np ClusterIP client tcp 203.0.113.11:80",
        "default/np NodePort external tcp 192.0.2.11:30080",
      ],
    },
    {
      name: "external IPs and VIP load-balancer IPs are asked from outside; ipMode Proxy is skipped",
      yaml: service(
        "lb",
        `{ type: LoadBalancer, clusterIP: 203.0.113.12, externalIPs: [203.0.113.100], ports: [{ port: 443, protocol: TCP, nodePort: 30443 }] }
status: { loadBalancer: { ingress: [{ ip: 203.0.113.200 }, { ip: 203.0.113.202, ipMode: Proxy }] } }`,
      ),
      want: [
        "default/lb ClusterIP client tcp 203.0.113.12:443",
        "default/lb NodePort external tcp 192.0.2.11:30443",
        "default/lb ExternalIP external tcp 203.0.113.100:443",
        "default/lb LoadBalancer external tcp 203.0.113.200:443",
      ],
    },
    {
      name: "UDP ports are asked over UDP and SCTP ports are skipped",
      yaml: service(
        "dns",
        `{ clusterIP: 203.0.113.53, ports: [{ name: dns, port: 53, protocol: UDP }, { name: s, port: 9, protocol: SCTP }] }`,
      ),
      want: ["default/dns:dns ClusterIP client udp 203.0.113.53:53"],
    },
    {
      name: "headless, ExternalName and other proxies' Services are not asked",
      yaml:
        service("headless", `{ clusterIP: None, ports: [{ port: 80 }] }`) +
        service("ext", `{ type: ExternalName, externalName: docs.example.com }`) +
        service(
          "other",
          `{ clusterIP: 203.0.113.17, ports: [{ port: 80 }] }`,
          `, labels: { service.kubernetes.io/service-proxy-name: x }`,
        ),
      want: [],
    },
  ];
  for (const tc of cases) {
    test(tc.name, () => {
      const plan = planDemo(readClusterFile(NODE + tc.yaml), "node-1");
      assert.deepEqual(
        plan.targets.map((t) => `${t.service} ${t.via} ${t.from} ${t.proto} ${t.host}:${t.port}`),
        tc.want,
      );
    });
  }
});

describe("planDemo: pods", () => {
  test("one pod per targetRef with every address and port of its slices; unnamed endpoints by address", () => {
    const yaml = `${service("dual", `{ clusterIP: 203.0.113.16, ports: [{ port: 80 }] }`)}---
kind: EndpointSlice
metadata: { name: dual-v4, labels: { kubernetes.io/service-name: dual } }
addressType: IPv4
ports: [{ port: 8080, protocol: TCP }, { port: 5353, protocol: UDP }]
endpoints:
  - { addresses: [198.51.100.8], targetRef: { kind: Pod, name: dual-a } }
  - { addresses: [198.51.100.9] }
---
kind: EndpointSlice
metadata: { name: dual-v6, labels: { kubernetes.io/service-name: dual } }
addressType: IPv6
ports: [{ port: 8080 }]
endpoints:
  - { addresses: ["2001:db8:1::8"], targetRef: { kind: Pod, name: dual-a } }
---
kind: EndpointSlice
metadata: { name: gone, labels: { kubernetes.io/service-name: no-such-service } }
endpoints: [{ addresses: [198.51.100.30] }]
`;
    const plan = planDemo(readClusterFile(NODE + yaml), "node-1");
    assert.deepEqual(plan.pods, [
      {
        name: "dual-a",
        addresses: ["198.51.100.8", "2001:db8:1::8"],
        echo: { tcpPorts: [8080], udpPorts: [5353] },
      },
      { name: "198.51.100.9", addresses: ["198.51.100.9"], echo: { tcpPorts: [8080], udpPorts: [5353] } },
    ]);
  });

  test("the node IPs are the Node's InternalIPs; an unknown node has none", () => {
    const objects = readClusterFile(NODE);
    assert.deepEqual(
      [planDemo(objects, "node-1").nodeIPv4, planDemo(objects, "node-1").nodeIPv6],
      ["192.0.2.11", "2001:db8::11"],
    );
    assert.equal(planDemo(objects, "node-9").nodeIPv4, undefined);
  });

  test("the file source's parser reads it: kind: List is unfolded and YAML errors are reported", () => {
    const list = readClusterFile(`{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n"}}]}`);
    assert.deepEqual(
      list.nodes.map((n) => n.metadata.name),
      ["n"],
    );
    assert.throws(() => readClusterFile("a: [1, 2"), /cluster file/);
  });

  test("the bundled example gives pods and every kind of target", () => {
    const text = readFileSync(new URL("../../../examples/cluster.yaml", import.meta.url), "utf8");
    const plan = planDemo(readClusterFile(text), "node-1");
    assert.ok(plan.pods.length > 0);
    assert.deepEqual(
      new Set(plan.targets.map((t) => t.via)),
      new Set(["ClusterIP", "NodePort", "ExternalIP", "LoadBalancer"]),
    );
    assert.ok(
      plan.targets.some((t) => t.host.includes(":")),
      "a dual-stack Service is asked over IPv6",
    );
  });
});
