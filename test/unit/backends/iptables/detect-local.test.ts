// --detect-local-mode as kube-proxy's local traffic detector: the iptables rules each mode
// produces for the masquerade of off-cluster ClusterIP traffic (KPNG-MASQ-NON-POD) and the eTP
// Local short-circuit of pod traffic to a NodePort.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type FamilySettings, familySettings } from "../../../../src/backend-core/family-settings.ts";
import { portChain } from "../../../../src/backends/iptables/names.ts";
import { parseIptablesOptions } from "../../../../src/backends/iptables/plugin.ts";
import { serviceRules } from "../../../../src/backends/iptables/render-service.ts";
import { staticRules } from "../../../../src/backends/iptables/ruleset.ts";
import { UsageError } from "../../../../src/plugin/usage-error.ts";
import { ep, port, service } from "./fixtures.ts";

const SP = "default/web/tcp/80";
const SVC = portChain.internal(SP);
const EXT = portChain.external(SP);
const XEP = portChain.externalEndpoints(SP);
const NODE_POD_CIDRS = ["10.244.1.0/24", "fd00:10:244:1::/64"];

function v4(flags: Record<string, string>): FamilySettings {
  const [cfg] = familySettings(
    parseIptablesOptions({ nodeportAddresses: "0.0.0.0/0", clusterCidr: "10.244.0.0/16", ...flags }),
    ["192.0.2.10"],
    NODE_POD_CIDRS,
  );
  assert.ok(cfg);
  return cfg;
}

const etpLocal = () =>
  service({
    type: "NodePort",
    externalTrafficPolicy: "Local",
    ports: [port({ nodePort: 30080, externalEndpoints: [ep("198.51.100.2", 8080, { local: true })] })],
  });

const rows: [string, Record<string, string>, string | undefined][] = [
  ["ClusterCIDR: a source in the cluster CIDRs is a pod", {}, "-s 10.244.0.0/16"],
  ["ClusterCIDR without clusterCIDR: pods are not told apart", { clusterCidr: "" }, undefined],
  [
    "NodeCIDR: a source in this Node's spec.podCIDRs is a pod",
    { detectLocalMode: "NodeCIDR" },
    "-s 10.244.1.0/24",
  ],
  [
    "BridgeInterface: a packet that came in on the bridge is from a pod",
    { detectLocalMode: "BridgeInterface", podBridgeInterface: "cni0" },
    "-i cni0",
  ],
  [
    "InterfaceNamePrefix: a packet that came in on an interface named veth… is from a pod",
    { detectLocalMode: "InterfaceNamePrefix", podInterfaceNamePrefix: "veth" },
    "-i veth+",
  ],
];

describe("--detect-local-mode: the iptables rules of each mode", () => {
  for (const [name, flags, pods] of rows)
    test(name, () => {
      const cfg = v4(flags);
      // Off-cluster ClusterIP traffic: masqueraded unless it comes from a pod; nothing without a detector.
      const nat = staticRules(cfg, []).nat.filter((l) => l.startsWith("-A KPNG-MASQ-NON-POD"));
      assert.deepEqual(
        nat,
        pods === undefined
          ? ["-A KPNG-MASQ-NON-POD -j KPNG-MARK-MASQ"]
          : [`-A KPNG-MASQ-NON-POD ${pods} -j RETURN`, "-A KPNG-MASQ-NON-POD -j KPNG-MARK-MASQ"],
      );
      const toMasq = serviceRules(service(), cfg)
        .chains.get(SVC)
        ?.filter((r) => r.includes("MASQ"));
      assert.deepEqual(
        toMasq,
        pods === undefined
          ? []
          : [`-A ${SVC} -d 203.0.113.10/32 -p tcp -m tcp --dport 80 -j KPNG-MASQ-NON-POD`],
      );
      // eTP Local NodePort: pods go to every endpoint unmasqueraded, the node masqueraded, others local.
      assert.deepEqual(serviceRules(etpLocal(), cfg).chains.get(EXT), [
        ...(pods === undefined ? [] : [`-A ${EXT} ${pods} -g ${SVC}`]),
        `-A ${EXT} -m addrtype --src-type LOCAL -j KPNG-MARK-MASQ`,
        `-A ${EXT} -m addrtype --src-type LOCAL -g ${SVC}`,
        `-A ${EXT} -g ${XEP}`,
      ]);
    });

  test("refused before anything starts: a mode without its interface, an unknown mode", () => {
    for (const [flags, message] of [
      [{ detectLocalMode: "BridgeInterface" }, /--pod-bridge-interface: required/],
      [{ detectLocalMode: "InterfaceNamePrefix", podInterfaceNamePrefix: "veth +" }, /not an interface name/],
      [{ detectLocalMode: "Pods" }, /--detect-local-mode/],
    ] as const)
      assert.throws(
        () => parseIptablesOptions(flags),
        (e) => e instanceof UsageError && message.test(e.message),
      );
  });
});
