import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ContainerPort } from "../../../../src/controllers/fallback/pod.ts";
import { resolvePorts } from "../../../../src/controllers/fallback/ports.ts";
import type { ServicePort } from "../../../../src/model/kube.ts";

function sp(
  name: string,
  targetPort: number | string,
  protocol: ServicePort["protocol"] = "TCP",
): ServicePort {
  return { name, protocol, port: 80, nodePort: 0, targetPort };
}

const HTTP_8080: ContainerPort = { name: "http", containerPort: 8080, protocol: "TCP" };
const DNS_UDP: ContainerPort = { name: "dns", containerPort: 5353, protocol: "UDP" };

interface Row {
  readonly name: string;
  readonly service: readonly ServicePort[];
  readonly pod: readonly ContainerPort[];
  readonly expect: readonly string[];
}

const rows: Row[] = [
  {
    name: "a numeric targetPort is used as is",
    service: [sp("web", 9000)],
    pod: [],
    expect: ["web/TCP/9000"],
  },
  {
    name: "an unset targetPort means the Service port",
    service: [sp("web", "")],
    pod: [],
    expect: ["web/TCP/80"],
  },
  {
    name: "a named targetPort is the pod's container port",
    service: [sp("web", "http")],
    pod: [HTTP_8080],
    expect: ["web/TCP/8080"],
  },
  {
    name: "a pod without the named port does not serve that port",
    service: [sp("web", "http")],
    pod: [],
    expect: [],
  },
  {
    name: "the named port must have the Service port's protocol",
    service: [sp("dns", "dns", "TCP")],
    pod: [DNS_UDP],
    expect: [],
  },
  {
    name: "each Service port resolves on its own",
    service: [sp("web", "http"), sp("dns", "dns", "UDP"), sp("admin", 9090)],
    pod: [HTTP_8080, DNS_UDP],
    expect: ["web/TCP/8080", "dns/UDP/5353", "admin/TCP/9090"],
  },
];

describe("target port resolution", () => {
  for (const row of rows) {
    test(row.name, () => {
      const got = resolvePorts(row.service, row.pod).map((p) => `${p.name}/${p.protocol}/${p.port}`);
      assert.deepEqual(got, row.expect);
    });
  }
});
