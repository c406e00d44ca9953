// --detect-local-mode as kube-proxy's local traffic detector: the nft rules each mode produces
// for the two decisions that depend on it, the masquerade of off-cluster ClusterIP traffic and
// the eTP Local short-circuit of pod traffic to a NodePort.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { skeletonOps } from "../../../../src/backends/nft/base.ts";
import { tableConfigs } from "../../../../src/backends/nft/config.ts";
import type { Fragment, TableConfig } from "../../../../src/backends/nft/fragment.ts";
import { chainName } from "../../../../src/backends/nft/names.ts";
import { serviceFragment } from "../../../../src/backends/nft/render-service.ts";
import { ep, port, service } from "./fixtures.ts";

const SP = "default/web/tcp/80";
const INT = chainName.internal(SP);
const EXT = chainName.external(SP);
const XEP = chainName.externalEndpoints(SP);

const CLUSTER_CIDRS = "10.244.0.0/16,fd00:10:244::/56";
/** The Node's spec.podCIDRs (NodeCIDR mode). */
const NODE_POD_CIDRS = ["10.244.1.0/24", "fd00:10:244:1::/64"];

function v4(flags: {
  readonly mode?: string;
  readonly clusterCIDRs?: string;
  readonly bridge?: string;
  readonly prefix?: string;
}): TableConfig {
  const [cfg] = tableConfigs(
    {
      table: "kpng",
      nodePortAddresses: "0.0.0.0/0",
      clusterCIDRs: flags.clusterCIDRs ?? CLUSTER_CIDRS,
      masqueradeAll: false,
      ...(flags.mode !== undefined && { detectLocalMode: flags.mode }),
      ...(flags.bridge !== undefined && { podBridgeInterface: flags.bridge }),
      ...(flags.prefix !== undefined && { podInterfaceNamePrefix: flags.prefix }),
    },
    ["192.0.2.10"],
    NODE_POD_CIDRS,
  );
  assert.ok(cfg);
  return cfg;
}

function rules(f: Fragment, name: string): readonly string[] | undefined {
  return [...f.chains, ...f.sharedChains].find((c) => c.name === name)?.rules;
}

/** The pod-cidrs set's elements as the skeleton writes them. */
function podCIDRSet(cfg: TableConfig): readonly string[] {
  return skeletonOps(cfg).flatMap((op) =>
    op.verb === "add" && op.kind === "element" && op.set === "pod-cidrs" ? op.elements : [],
  );
}

const etpLocal = () =>
  service({
    type: "NodePort",
    externalTrafficPolicy: "Local",
    ports: [port({ nodePort: 30080, externalEndpoints: [ep("198.51.100.2", 8080, { local: true })] })],
  });

interface Row {
  readonly mode: string;
  readonly cfg: TableConfig;
  /** The pod-cidrs set. */
  readonly podCIDRs: readonly string[];
  /** ClusterIP traffic not from pods is masqueraded by this rule; undefined: none is. */
  readonly masquerade: string | undefined;
  /** Pod traffic to an eTP Local NodePort goes to every endpoint by this rule; undefined: none. */
  readonly shortCircuit: string | undefined;
}

const rows: Row[] = [
  {
    mode: "ClusterCIDR: a source in the cluster CIDRs is a pod",
    cfg: v4({}),
    podCIDRs: ["10.244.0.0/16"],
    masquerade: "ip saddr != @pod-cidrs jump mark-for-masquerade",
    shortCircuit: `ip saddr @pod-cidrs goto ${INT}`,
  },
  {
    mode: "ClusterCIDR without clusterCIDR: pods are not told apart",
    cfg: v4({ clusterCIDRs: "" }),
    podCIDRs: [],
    masquerade: undefined,
    shortCircuit: undefined,
  },
  {
    mode: "NodeCIDR: a source in this Node's spec.podCIDRs is a pod (clusterCIDR is not used)",
    cfg: v4({ mode: "NodeCIDR" }),
    podCIDRs: ["10.244.1.0/24"],
    masquerade: "ip saddr != @pod-cidrs jump mark-for-masquerade",
    shortCircuit: `ip saddr @pod-cidrs goto ${INT}`,
  },
  {
    mode: "BridgeInterface: a packet that came in on the bridge is from a pod",
    cfg: v4({ mode: "BridgeInterface", bridge: "cni0" }),
    podCIDRs: [],
    masquerade: 'iifname != "cni0" jump mark-for-masquerade',
    shortCircuit: `iifname "cni0" goto ${INT}`,
  },
  {
    mode: "InterfaceNamePrefix: a packet that came in on an interface named veth… is from a pod",
    cfg: v4({ mode: "InterfaceNamePrefix", prefix: "veth" }),
    podCIDRs: [],
    masquerade: 'iifname != "veth*" jump mark-for-masquerade',
    shortCircuit: `iifname "veth*" goto ${INT}`,
  },
];

describe("--detect-local-mode: the nft rules of each mode", () => {
  for (const row of rows)
    test(row.mode, () => {
      assert.deepEqual(podCIDRSet(row.cfg), row.podCIDRs);
      const cluster = serviceFragment(service(), row.cfg);
      const dnat = "meta l4proto tcp dnat ip to ip daddr . th dport . numgen random mod 2 map @endpoints-tcp";
      assert.deepEqual(
        rules(cluster, "pick-tcp-2"),
        row.masquerade === undefined ? [dnat] : [row.masquerade, dnat],
      );
      const sticky = serviceFragment(service({ sessionAffinitySeconds: 3 }), row.cfg);
      const toClusterIP = "ip daddr 203.0.113.10 meta l4proto tcp th dport 80";
      assert.deepEqual(
        rules(sticky, INT)?.filter((r) => r.includes("mark-for-masquerade")),
        row.masquerade === undefined ? [] : [`${toClusterIP} ${row.masquerade}`],
      );
      const local = serviceFragment(etpLocal(), row.cfg);
      assert.deepEqual(rules(local, EXT), [
        ...(row.shortCircuit === undefined ? [] : [row.shortCircuit]),
        "fib saddr type local jump mark-for-masquerade",
        `fib saddr type local goto ${INT}`,
        `goto ${XEP}`,
      ]);
    });

  test("NodeCIDR before the Node has podCIDRs: pods are not told apart", () => {
    const [cfg] = tableConfigs(
      {
        table: "kpng",
        nodePortAddresses: "primary",
        clusterCIDRs: CLUSTER_CIDRS,
        masqueradeAll: false,
        detectLocalMode: "NodeCIDR",
      },
      ["192.0.2.10"],
      [],
    );
    assert.ok(cfg);
    assert.deepEqual(podCIDRSet(cfg), []);
    assert.equal(rules(serviceFragment(service(), cfg), "pick-tcp-2")?.length, 1);
  });

  test("each family takes the Node's podCIDR of its own family", () => {
    const [, v6] = tableConfigs(
      {
        table: "kpng",
        nodePortAddresses: "primary",
        clusterCIDRs: "",
        masqueradeAll: false,
        detectLocalMode: "NodeCIDR",
      },
      ["192.0.2.10"],
      NODE_POD_CIDRS,
    );
    assert.ok(v6);
    assert.deepEqual(podCIDRSet(v6), ["fd00:10:244:1::/64"]);
  });

  const bad: [string, Record<string, string>, RegExp][] = [
    ["an unknown mode", { detectLocalMode: "PodCIDR" }, /--detect-local-mode: "PodCIDR" is not one of/],
    [
      "BridgeInterface without the bridge",
      { detectLocalMode: "BridgeInterface" },
      /--pod-bridge-interface: required/,
    ],
    [
      "InterfaceNamePrefix without a prefix",
      { detectLocalMode: "InterfaceNamePrefix" },
      /--pod-interface-name-prefix: required/,
    ],
    [
      "an interface name nft would parse",
      { detectLocalMode: "BridgeInterface", podBridgeInterface: 'cni0" accept' },
      /not an interface name/,
    ],
    [
      "a name longer than Linux allows",
      { detectLocalMode: "InterfaceNamePrefix", podInterfaceNamePrefix: "a-very-long-prefix" },
      /not an interface name/,
    ],
  ];
  for (const [name, flags, message] of bad)
    test(`refused: ${name}`, () => {
      assert.throws(
        () =>
          tableConfigs(
            { table: "kpng", nodePortAddresses: "primary", clusterCIDRs: "", masqueradeAll: false, ...flags },
            [],
          ),
        message,
      );
    });
});
