import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { clusterIPForFamily, servedClusterIPs, servedFamilies } from "../../../src/brain/service-ips.ts";
import { svc } from "./fixtures.ts";

describe("servedClusterIPs: each served family with its cluster IP", () => {
  const cases = [
    { name: "single stack", service: svc(), want: [["IPv4", "198.51.100.10"]] },
    {
      name: "dual stack, IPv6 primary, the IPv6 address made canonical",
      service: svc({
        clusterIP: "2001:DB8::0:1",
        clusterIPs: ["2001:DB8::0:1", "198.51.100.7"],
        ipFamilies: ["IPv6", "IPv4"],
      }),
      want: [
        ["IPv6", "2001:db8::1"],
        ["IPv4", "198.51.100.7"],
      ],
    },
    {
      name: "no ipFamilies (an older API server): the cluster IP's own family",
      service: svc({ clusterIP: "198.51.100.9", clusterIPs: [], ipFamilies: [] }),
      want: [["IPv4", "198.51.100.9"]],
    },
    { name: "headless", service: svc({ clusterIP: "None", clusterIPs: ["None"] }), want: [] },
  ] as const;
  for (const { name, service, want } of cases) {
    test(name, () => {
      assert.deepEqual(servedClusterIPs(service), want);
      assert.deepEqual(
        servedFamilies(service),
        want.map(([family]) => family),
      );
      for (const [family, ip] of want) assert.equal(clusterIPForFamily(service, family), ip);
    });
  }
});
