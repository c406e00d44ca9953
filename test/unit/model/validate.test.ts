import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseEndpointSlice, parseKubeObject, parseNode, parseService } from "../../../src/model/validate.ts";

// Raw API objects are edited freely by the rows below, as a YAML author would.
// biome-ignore lint/suspicious/noExplicitAny: fixtures are untyped JSON on purpose
type Raw = Record<string, any>;

function service(): Raw {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "shop", resourceVersion: "7", labels: { app: "web" } },
    spec: {
      type: "ClusterIP",
      clusterIP: "198.51.100.10",
      clusterIPs: ["198.51.100.10"],
      ipFamilies: ["IPv4"],
      ports: [
        { name: "http", port: 80, targetPort: 8080 },
        { name: "dns", protocol: "UDP", port: 53, targetPort: "dns" },
      ],
    },
  };
}

function slice(): Raw {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: "web-abc", namespace: "shop", labels: { "kubernetes.io/service-name": "web" } },
    addressType: "IPv4",
    ports: [{ name: "http", protocol: "TCP", port: 8080 }],
    endpoints: [
      {
        addresses: ["203.0.113.1"],
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: "n1",
        zone: "z1",
        hints: { forZones: [{ name: "z1" }], forNodes: [{ name: "n1" }] },
        targetRef: { kind: "Pod", name: "web-1" },
      },
    ],
  };
}

function node(): Raw {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: "n1", labels: { "topology.kubernetes.io/zone": "z1" } },
    spec: { podCIDRs: ["192.0.2.0/24"] },
    status: {
      addresses: [
        { type: "InternalIP", address: "198.51.100.1" },
        { type: "Hostname", address: "n1" },
      ],
    },
  };
}

interface InvalidRow {
  readonly name: string;
  readonly make: () => Raw;
  readonly parse: (raw: unknown) => { ok: boolean; reason?: string; kind?: string; name?: string };
  /** Expected exact reason. */
  readonly reason: string;
}

function svcWith(edit: (s: Raw) => void): () => Raw {
  return () => {
    const s = service();
    edit(s);
    return s;
  };
}
function sliceWith(edit: (s: Raw) => void): () => Raw {
  return () => {
    const s = slice();
    edit(s);
    return s;
  };
}
function nodeWith(edit: (s: Raw) => void): () => Raw {
  return () => {
    const s = node();
    edit(s);
    return s;
  };
}

const invalidRows: InvalidRow[] = [
  {
    name: "service port above 65535",
    make: svcWith((s) => {
      s.spec.ports[1].port = 70000;
    }),
    parse: parseService,
    reason: "spec.ports[1].port: 70000 is out of range 1-65535",
  },
  {
    name: "service port 0",
    make: svcWith((s) => {
      s.spec.ports[0].port = 0;
    }),
    parse: parseService,
    reason: "spec.ports[0].port: 0 is out of range 1-65535",
  },
  {
    name: "service port missing",
    make: svcWith((s) => {
      delete s.spec.ports[0].port;
    }),
    parse: parseService,
    reason: "spec.ports[0].port: expected an integer, got undefined undefined",
  },
  {
    name: "service port given as a string",
    make: svcWith((s) => {
      s.spec.ports[0].port = "80";
    }),
    parse: parseService,
    reason: 'spec.ports[0].port: expected an integer, got "80"',
  },
  {
    name: "fractional port",
    make: svcWith((s) => {
      s.spec.ports[0].port = 80.5;
    }),
    parse: parseService,
    reason: "spec.ports[0].port: expected an integer, got number 80.5",
  },
  {
    name: "nodePort out of range",
    make: svcWith((s) => {
      s.spec.ports[0].nodePort = 65536;
    }),
    parse: parseService,
    reason: "spec.ports[0].nodePort: 65536 is out of range 0-65535",
  },
  {
    name: "healthCheckNodePort negative",
    make: svcWith((s) => {
      s.spec.healthCheckNodePort = -1;
    }),
    parse: parseService,
    reason: "spec.healthCheckNodePort: -1 is out of range 0-65535",
  },
  {
    name: "unknown protocol",
    make: svcWith((s) => {
      s.spec.ports[0].protocol = "ICMP";
    }),
    parse: parseService,
    reason: 'spec.ports[0].protocol: "ICMP" is not one of TCP, UDP, SCTP',
  },
  {
    name: "protocol in lower case",
    make: svcWith((s) => {
      s.spec.ports[0].protocol = "tcp";
    }),
    parse: parseService,
    reason: 'spec.ports[0].protocol: "tcp" is not one of TCP, UDP, SCTP',
  },
  {
    name: "targetPort out of range",
    make: svcWith((s) => {
      s.spec.ports[0].targetPort = 0;
    }),
    parse: parseService,
    reason: "spec.ports[0].targetPort: 0 is out of range 1-65535",
  },
  {
    name: "two ports with the same name",
    make: svcWith((s) => {
      s.spec.ports[1].name = "http";
    }),
    parse: parseService,
    reason: 'spec.ports[1].name: "http" is used by more than one port',
  },
  {
    name: "unknown service type",
    make: svcWith((s) => {
      s.spec.type = "Magic";
    }),
    parse: parseService,
    reason: 'spec.type: "Magic" is not one of ClusterIP, NodePort, LoadBalancer, ExternalName',
  },
  {
    name: "clusterIP not an IP",
    make: svcWith((s) => {
      s.spec.clusterIP = "10.0.0.300";
      s.spec.clusterIPs = [];
    }),
    parse: parseService,
    reason: 'spec.clusterIP: "10.0.0.300" is not a valid IP address',
  },
  {
    name: "clusterIPs[0] differs from clusterIP",
    make: svcWith((s) => {
      s.spec.clusterIPs = ["198.51.100.11"];
    }),
    parse: parseService,
    reason: 'spec.clusterIPs[0]: "198.51.100.11" differs from spec.clusterIP "198.51.100.10"',
  },
  {
    name: "IPv4 clusterIP under ipFamilies IPv6",
    make: svcWith((s) => {
      s.spec.ipFamilies = ["IPv6"];
    }),
    parse: parseService,
    reason: "spec.clusterIPs[0]: 198.51.100.10 is not IPv6 as spec.ipFamilies[0] says",
  },
  {
    name: "second clusterIP without a family",
    make: svcWith((s) => {
      s.spec.clusterIPs = ["198.51.100.10", "2001:db8::10"];
    }),
    parse: parseService,
    reason: "spec.ipFamilies: no family for spec.clusterIPs[1] 2001:db8::10",
  },
  {
    name: "two clusterIPs of one family",
    make: svcWith((s) => {
      s.spec.clusterIPs = ["198.51.100.10", "198.51.100.11"];
      s.spec.ipFamilies = ["IPv4", "IPv6"];
    }),
    parse: parseService,
    reason: "spec.clusterIPs: two entries must be one IPv4 and one IPv6 address",
  },
  {
    name: "ipFamilies listing a family twice",
    make: svcWith((s) => {
      s.spec.ipFamilies = ["IPv4", "IPv4"];
    }),
    parse: parseService,
    reason: "spec.ipFamilies: IPv4 is listed twice",
  },
  {
    name: "unknown ip family",
    make: svcWith((s) => {
      s.spec.ipFamilies = ["IPv5"];
    }),
    parse: parseService,
    reason: 'spec.ipFamilies[0]: "IPv5" is not one of IPv4, IPv6',
  },
  {
    name: "externalIP not an IP",
    make: svcWith((s) => {
      s.spec.externalIPs = ["203.0.113.5", "example.com"];
    }),
    parse: parseService,
    reason: 'spec.externalIPs[1]: "example.com" is not a valid IP address',
  },
  {
    name: "source range that is not a CIDR after trimming",
    make: svcWith((s) => {
      s.spec.loadBalancerSourceRanges = [" 203.0.113.0/24 ", "203.0.113.0"];
    }),
    parse: parseService,
    reason: 'spec.loadBalancerSourceRanges[1]: "203.0.113.0" is not a CIDR',
  },
  {
    name: "source range with prefix too long",
    make: svcWith((s) => {
      s.spec.loadBalancerSourceRanges = ["203.0.113.0/33"];
    }),
    parse: parseService,
    reason: 'spec.loadBalancerSourceRanges[0]: "203.0.113.0/33" is not a CIDR',
  },
  {
    name: "session affinity timeout above one day",
    make: svcWith((s) => {
      s.spec.sessionAffinity = "ClientIP";
      s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 86401 } };
    }),
    parse: parseService,
    reason: "spec.sessionAffinityConfig.clientIP.timeoutSeconds: 86401 is out of range 1-86400",
  },
  {
    name: "session affinity timeout zero",
    make: svcWith((s) => {
      s.spec.sessionAffinity = "ClientIP";
      s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 0 } };
    }),
    parse: parseService,
    reason: "spec.sessionAffinityConfig.clientIP.timeoutSeconds: 0 is out of range 1-86400",
  },
  {
    name: "unknown session affinity",
    make: svcWith((s) => {
      s.spec.sessionAffinity = "Cookie";
    }),
    parse: parseService,
    reason: 'spec.sessionAffinity: "Cookie" is not one of None, ClientIP',
  },
  {
    name: "unknown external traffic policy",
    make: svcWith((s) => {
      s.spec.externalTrafficPolicy = "Nearby";
    }),
    parse: parseService,
    reason: 'spec.externalTrafficPolicy: "Nearby" is not one of Cluster, Local',
  },
  {
    name: "unknown internal traffic policy",
    make: svcWith((s) => {
      s.spec.internalTrafficPolicy = "local";
    }),
    parse: parseService,
    reason: 'spec.internalTrafficPolicy: "local" is not one of Cluster, Local',
  },
  {
    name: "load balancer ingress ip invalid",
    make: svcWith((s) => {
      s.status = { loadBalancer: { ingress: [{ ip: "203.0.113.256" }] } };
    }),
    parse: parseService,
    reason: 'status.loadBalancer.ingress[0].ip: "203.0.113.256" is not a valid IP address',
  },
  {
    name: "load balancer ipMode unknown",
    make: svcWith((s) => {
      s.status = { loadBalancer: { ingress: [{ ip: "203.0.113.7", ipMode: "Tunnel" }] } };
    }),
    parse: parseService,
    reason: 'status.loadBalancer.ingress[0].ipMode: "Tunnel" is not one of VIP, Proxy',
  },
  {
    name: "service without a name",
    make: svcWith((s) => {
      delete s.metadata.name;
    }),
    parse: parseService,
    reason: "metadata.name: is required",
  },
  {
    name: "service name with capitals",
    make: svcWith((s) => {
      s.metadata.name = "Web";
    }),
    parse: parseService,
    reason: "metadata.name: \"Web\" is not a valid name (lowercase letters, digits, '-' and '.')",
  },
  {
    name: "label value that is not a string",
    make: svcWith((s) => {
      s.metadata.labels.version = 2;
    }),
    parse: parseService,
    reason: 'metadata.labels["version"]: expected a string, got number 2',
  },
  {
    name: "labels that are a list",
    make: svcWith((s) => {
      s.metadata.labels = ["app=web"];
    }),
    parse: parseService,
    reason: "metadata.labels: expected an object, got an array",
  },
  {
    name: "ports not a list",
    make: svcWith((s) => {
      s.spec.ports = { name: "http" };
    }),
    parse: parseService,
    reason: "spec.ports: expected a list, got an object",
  },
  {
    name: "spec not an object",
    make: svcWith((s) => {
      s.spec = "ClusterIP";
    }),
    parse: parseService,
    reason: 'spec: expected an object, got "ClusterIP"',
  },
  {
    name: "service with another apiVersion",
    make: svcWith((s) => {
      s.apiVersion = "v2";
    }),
    parse: parseService,
    reason: 'apiVersion: "v2" is not supported for Service (use v1)',
  },
  {
    name: "service parser given a Node",
    make: svcWith((s) => {
      s.kind = "Node";
    }),
    parse: parseService,
    reason: 'kind: expected Service, got "Node"',
  },
  {
    name: "IPv6 address in an IPv4 slice",
    make: sliceWith((s) => {
      s.endpoints[0].addresses = ["2001:db8::1"];
    }),
    parse: parseEndpointSlice,
    reason: "endpoints[0].addresses[0]: 2001:db8::1 is an IPv6 address in a slice of addressType IPv4",
  },
  {
    name: "IPv4 address in an IPv6 slice",
    make: sliceWith((s) => {
      s.addressType = "IPv6";
    }),
    parse: parseEndpointSlice,
    reason: "endpoints[0].addresses[0]: 203.0.113.1 is an IPv4 address in a slice of addressType IPv6",
  },
  {
    name: "slice address that is not an IP",
    make: sliceWith((s) => {
      s.endpoints[0].addresses = ["203.0.113"];
    }),
    parse: parseEndpointSlice,
    reason: 'endpoints[0].addresses[0]: "203.0.113" is not a valid IP address',
  },
  {
    name: "FQDN slice address with a space",
    make: sliceWith((s) => {
      s.addressType = "FQDN";
      s.endpoints[0].addresses = ["bad name"];
    }),
    parse: parseEndpointSlice,
    reason: 'endpoints[0].addresses[0]: "bad name" is not a valid FQDN',
  },
  {
    name: "slice without addressType",
    make: sliceWith((s) => {
      delete s.addressType;
    }),
    parse: parseEndpointSlice,
    reason: "addressType: is required",
  },
  {
    name: "slice with unknown addressType",
    make: sliceWith((s) => {
      s.addressType = "IPv5";
    }),
    parse: parseEndpointSlice,
    reason: 'addressType: "IPv5" is not one of IPv4, IPv6, FQDN',
  },
  {
    name: "ready condition given as a string",
    make: sliceWith((s) => {
      s.endpoints[0].conditions.ready = "true";
    }),
    parse: parseEndpointSlice,
    reason: 'endpoints[0].conditions.ready: expected true, false or null, got "true"',
  },
  {
    name: "terminating condition given as a number",
    make: sliceWith((s) => {
      s.endpoints[0].conditions.terminating = 1;
    }),
    parse: parseEndpointSlice,
    reason: "endpoints[0].conditions.terminating: expected true, false or null, got number 1",
  },
  {
    name: "zone hints not a list",
    make: sliceWith((s) => {
      s.endpoints[0].hints.forZones = { name: "z1" };
    }),
    parse: parseEndpointSlice,
    reason: "endpoints[0].hints.forZones: expected a list, got an object",
  },
  {
    name: "node hint without a name",
    make: sliceWith((s) => {
      s.endpoints[0].hints.forNodes = [{}];
    }),
    parse: parseEndpointSlice,
    reason: "endpoints[0].hints.forNodes[0].name: is required",
  },
  {
    name: "slice port above 65535",
    make: sliceWith((s) => {
      s.ports[0].port = 65536;
    }),
    parse: parseEndpointSlice,
    reason: "ports[0].port: 65536 is out of range 0-65535",
  },
  {
    name: "slice port with unknown protocol",
    make: sliceWith((s) => {
      s.ports[0].protocol = "QUIC";
    }),
    parse: parseEndpointSlice,
    reason: 'ports[0].protocol: "QUIC" is not one of TCP, UDP, SCTP',
  },
  {
    name: "slice of discovery v1beta1",
    make: sliceWith((s) => {
      s.apiVersion = "discovery.k8s.io/v1beta1";
    }),
    parse: parseEndpointSlice,
    reason:
      'apiVersion: "discovery.k8s.io/v1beta1" is not supported for EndpointSlice (use discovery.k8s.io/v1)',
  },
  {
    name: "node InternalIP that is not an IP",
    make: nodeWith((n) => {
      n.status.addresses[0].address = "node-1.example";
    }),
    parse: parseNode,
    reason: 'status.addresses[0].address: "node-1.example" is not a valid IP address for type InternalIP',
  },
  {
    name: "node address without a type",
    make: nodeWith((n) => {
      delete n.status.addresses[1].type;
    }),
    parse: parseNode,
    reason: "status.addresses[1].type: is required",
  },
  {
    name: "node podCIDR that is not a CIDR",
    make: nodeWith((n) => {
      n.spec.podCIDRs = ["192.0.2.0/24", "2001:db8::/129"];
    }),
    parse: parseNode,
    reason: 'spec.podCIDRs[1]: "2001:db8::/129" is not a CIDR',
  },
  {
    name: "node without a name",
    make: nodeWith((n) => {
      n.metadata = {};
    }),
    parse: parseNode,
    reason: "metadata.name: is required",
  },
];

describe("validation rejects bad input with a reason naming the field", () => {
  for (const row of invalidRows) {
    test(row.name, () => {
      const result = row.parse(row.make());
      assert.equal(result.ok, false);
      assert.equal(result.reason, row.reason);
    });
  }
});

describe("validation reports kind and best-effort name", () => {
  test("invalid service names namespace/name", () => {
    assert.deepEqual(parseService(svcWith((s) => (s.spec.type = "X"))()), {
      ok: false,
      kind: "Service",
      name: "shop/web",
      reason: 'spec.type: "X" is not one of ClusterIP, NodePort, LoadBalancer, ExternalName',
    });
  });
  test("object without namespace is named in the default namespace", () => {
    const r = parseService(
      svcWith((s) => {
        delete s.metadata.namespace;
        s.spec.type = "X";
      })(),
      "team",
    );
    assert.equal(r.ok, false);
    assert.equal(!r.ok && r.name, "team/web");
  });
  test("a non-object is rejected, not thrown", () => {
    for (const raw of [null, 42, "Service", [service()]]) {
      const r = parseService(raw);
      assert.equal(r.ok, false);
      assert.equal(!r.ok && r.reason.startsWith("object: expected an object"), true);
    }
  });
  test("a node is named without namespace", () => {
    const r = parseNode(nodeWith((n) => (n.spec.podCIDRs = ["x"]))());
    assert.equal(!r.ok && r.name, "n1");
  });
});

describe("validation applies the API defaults", () => {
  test("defaults: type ClusterIP, protocol TCP, policies Cluster, affinity None, namespace default", () => {
    const r = parseService({
      metadata: { name: "a" },
      spec: { clusterIP: "198.51.100.1", ports: [{ port: 80 }] },
    });
    assert.ok(r.ok);
    const s = r.value;
    assert.equal(s.metadata.namespace, "default");
    assert.equal(s.type, "ClusterIP");
    assert.equal(s.externalTrafficPolicy, "Cluster");
    assert.equal(s.internalTrafficPolicy, "Cluster");
    assert.equal(s.sessionAffinity, "None");
    assert.equal(s.sessionAffinityTimeoutSeconds, 0);
    assert.deepEqual(s.ports, [{ name: "", protocol: "TCP", port: 80, nodePort: 0, targetPort: "" }]);
    assert.deepEqual(s.clusterIPs, []);
    assert.deepEqual(s.ipFamilies, []);
  });
  test("ClientIP affinity without a timeout gets 10800 seconds", () => {
    const r = parseService(svcWith((s) => (s.spec.sessionAffinity = "ClientIP"))());
    assert.ok(r.ok);
    assert.equal(r.value.sessionAffinityTimeoutSeconds, 10800);
  });
  test("ClientIP affinity keeps a given timeout", () => {
    const r = parseService(
      svcWith((s) => {
        s.spec.sessionAffinity = "ClientIP";
        s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 60 } };
      })(),
    );
    assert.ok(r.ok);
    assert.equal(r.value.sessionAffinityTimeoutSeconds, 60);
  });
  test("headless clusterIP None and empty clusterIP are valid", () => {
    for (const ip of ["None", ""]) {
      const r = parseService(
        svcWith((s) => {
          s.spec.clusterIP = ip;
          s.spec.clusterIPs = ip ? [ip] : [];
        })(),
      );
      assert.ok(r.ok, ip);
      assert.equal(r.value.clusterIP, ip);
    }
  });
  test("dual-stack clusterIPs with matching ipFamilies are kept", () => {
    const r = parseService(
      svcWith((s) => {
        s.spec.clusterIPs = ["198.51.100.10", "2001:db8::10"];
        s.spec.ipFamilies = ["IPv4", "IPv6"];
      })(),
    );
    assert.ok(r.ok);
    assert.deepEqual(r.value.clusterIPs, ["198.51.100.10", "2001:db8::10"]);
  });
  test("source ranges keep their whitespace for the brain to trim", () => {
    const r = parseService(svcWith((s) => (s.spec.loadBalancerSourceRanges = [" 203.0.113.0/24 "]))());
    assert.ok(r.ok);
    assert.deepEqual(r.value.loadBalancerSourceRanges, [" 203.0.113.0/24 "]);
  });
  test("load balancer ingress: hostname only, ipMode unset and Proxy", () => {
    const r = parseService(
      svcWith((s) => {
        s.status = {
          loadBalancer: {
            ingress: [
              { hostname: "lb.example" },
              { ip: "203.0.113.7" },
              { ip: "203.0.113.8", ipMode: "Proxy" },
            ],
          },
        };
      })(),
    );
    assert.ok(r.ok);
    assert.deepEqual(r.value.loadBalancerIngress, [
      { ip: "", hostname: "lb.example", ipMode: undefined },
      { ip: "203.0.113.7", hostname: "", ipMode: undefined },
      { ip: "203.0.113.8", hostname: "", ipMode: "Proxy" },
    ]);
  });
  test("slice: service name from label, conditions, hints and pod", () => {
    const r = parseEndpointSlice(slice());
    assert.ok(r.ok);
    assert.equal(r.value.serviceName, "web");
    // As JSON documents of the store show it (an endpoint of one address is a OneAddressEndpoint).
    assert.deepEqual(JSON.parse(JSON.stringify(r.value.endpoints[0])), {
      addresses: ["203.0.113.1"],
      conditions: { ready: true, serving: true, terminating: false },
      hostname: "",
      nodeName: "n1",
      zone: "z1",
      zoneHints: ["z1"],
      nodeHints: ["n1"],
      podName: "web-1",
    });
  });
  test("slice: unset conditions and port fields read as null", () => {
    const r = parseEndpointSlice(
      sliceWith((s) => {
        s.ports = [{}, { name: "", port: 0 }];
        s.endpoints = [{ addresses: ["203.0.113.2"] }, { addresses: [], conditions: { ready: null } }];
        delete s.metadata.labels;
      })(),
    );
    assert.ok(r.ok);
    assert.equal(r.value.serviceName, "");
    assert.deepEqual(r.value.ports, [
      { name: null, protocol: "TCP", port: null },
      { name: "", protocol: "TCP", port: 0 },
    ]);
    assert.deepEqual(r.value.endpoints[0]?.conditions, { ready: null, serving: null, terminating: null });
    assert.deepEqual(r.value.endpoints[1]?.addresses, []);
  });
  test("FQDN slice accepts host names", () => {
    const r = parseEndpointSlice(
      sliceWith((s) => {
        s.addressType = "FQDN";
        s.endpoints[0].addresses = ["db.example.com"];
      })(),
    );
    assert.ok(r.ok);
  });
  test("node: singular podCIDR used when podCIDRs is absent", () => {
    const r = parseNode(nodeWith((n) => (n.spec = { podCIDR: "192.0.2.0/24" }))());
    assert.ok(r.ok);
    assert.deepEqual(r.value.podCIDRs, ["192.0.2.0/24"]);
    assert.equal(r.value.metadata.namespace, "");
  });
});

describe("parseKubeObject dispatches on kind", () => {
  test("each kind we read parses", () => {
    for (const [raw, kind] of [
      [service(), "Service"],
      [slice(), "EndpointSlice"],
      [node(), "Node"],
    ] as const) {
      const r = parseKubeObject(raw);
      assert.ok(r.ok);
      assert.equal(r.value.kind, kind);
    }
  });
  test("a kind we do not read is ignored, not an error", () => {
    const r = parseKubeObject({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } });
    assert.deepEqual(r, {
      ok: false,
      kind: "ConfigMap",
      name: "default/c",
      reason: "ignored kind",
      ignored: true,
    });
  });
  test("an object without kind is an error", () => {
    const r = parseKubeObject({ metadata: { name: "x" } });
    assert.equal(r.ok, false);
    assert.equal(r.ignored, undefined);
    assert.equal(!r.ok && r.reason, "kind: is required");
  });
});

describe("labels and annotations", () => {
  test("are read in their order; absent or null, they are one shared empty map", () => {
    const raw = service();
    raw.metadata.labels = { b: "2", a: "1", "1": "x", "example.com/c": "3" };
    raw.metadata.annotations = null;
    const r = parseService(raw);
    assert.ok(r.ok);
    assert.deepEqual(Object.entries(r.value.metadata.labels), Object.entries(raw.metadata.labels));
    const bare = parseService({ ...service(), metadata: { name: "bare", namespace: "shop" } });
    assert.ok(bare.ok);
    assert.equal(bare.value.metadata.labels, r.value.metadata.annotations);
    assert.ok(Object.isFrozen(bare.value.metadata.labels));
    assert.deepEqual(bare.value.metadata.labels, {});
  });
});
