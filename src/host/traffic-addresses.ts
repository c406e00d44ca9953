// The addresses every kernel backend's rules depend on beyond the local state: which of the
// node's addresses take NodePort traffic (--nodeport-addresses) and how traffic from pods is
// told apart (--detect-local-mode: by source in --cluster-cidr or in the Node's podCIDRs, or by
// input interface), with the same flags, defaults and checks for every backend.

import type { Command } from "commander";
import { z } from "zod";
import { canonicalCIDR, canonicalIP, familyOf } from "../model/ip.ts";
import type { IPFamily } from "../model/kube.ts";
import { ofFamily } from "../model/local.ts";
import { checkedBy, switchFlag } from "../plugin/options.ts";

export interface TrafficAddressSettings {
  /** "primary", or a comma list of CIDRs. */
  readonly nodePortAddresses: string;
  /** Comma list of pod CIDRs, possibly empty. */
  readonly clusterCIDRs: string;
  /** kube-proxy's detectLocalMode; ClusterCIDR when unset. */
  readonly detectLocalMode?: string;
  /** The pods' bridge (BridgeInterface mode). */
  readonly podBridgeInterface?: string;
  /** The prefix of the pods' host-side interfaces (InterfaceNamePrefix mode). */
  readonly podInterfaceNamePrefix?: string;
  readonly masqueradeAll: boolean;
  /** The bit of the packet mark that means "masquerade" (kube-proxy's masqueradeBit); 14 when unset. */
  readonly masqueradeBit?: string | number;
}

export function addTrafficAddressOptions(cmd: Command): void {
  cmd
    .option(
      "--nodeport-addresses <cidrs>",
      'addresses that accept NodePort traffic: "primary" (the node\'s primary IPs) or a comma list of CIDRs',
      "primary",
    )
    .option(
      "--cluster-cidr <cidrs>",
      "pod CIDRs (comma list, per family): traffic from them is pod traffic",
      "",
    )
    .option(
      "--detect-local-mode <mode>",
      "how pod traffic is told apart: ClusterCIDR (source in --cluster-cidr), NodeCIDR (source in the Node's podCIDRs), BridgeInterface (--pod-bridge-interface), InterfaceNamePrefix (--pod-interface-name-prefix)",
      "ClusterCIDR",
    )
    .option("--pod-bridge-interface <name>", "with --detect-local-mode BridgeInterface: the pods' bridge")
    .option(
      "--pod-interface-name-prefix <prefix>",
      "with --detect-local-mode InterfaceNamePrefix: the prefix of the pods' host-side interfaces",
    )
    .option("--masquerade-all", "masquerade all traffic to ClusterIPs", false)
    .option("--masquerade-bit <bit>", "the bit (0-31) of the packet mark that asks for masquerade", "14");
}

/** The canonical CIDRs of a comma list; throws an Error saying which one is malformed. */
function parseCIDRList(text: string): string[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((c) => {
      try {
        return canonicalCIDR(c);
      } catch {
        throw new Error(`"${c}" is not a CIDR (e.g. 10.244.0.0/16 or 2001:db8::/64)`);
      }
    });
}

/** Whether --nodeport-addresses asks for the node's primary IPs. */
export const isPrimary = (nodePortAddresses: string) => nodePortAddresses.trim() === "primary";

/** The NodePort CIDRs of --nodeport-addresses other than "primary"; throws an Error saying what to fix. */
function parseNodePortCIDRs(text: string): string[] {
  try {
    return parseCIDRList(text);
  } catch (err) {
    throw new Error(`${(err as Error).message}; give "primary" or a comma list of CIDRs`);
  }
}

/** The packet mark of a masquerade bit, e.g. 14 → "0x4000"; throws an Error saying what to fix. */
function masqueradeMark(bit: string | number | undefined): string {
  const n = bit === undefined ? 14 : Number(bit);
  if (!Number.isInteger(n) || n < 0 || n > 31) throw new Error(`"${bit}" is not a bit number from 0 to 31`);
  return `0x${(2 ** n).toString(16)}`;
}

/** The error of `read`, prefixed with the flag to fix. */
function named<T>(flag: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new Error(`${flag}: ${(err as Error).message}`);
  }
}

const DETECT_LOCAL_MODES = ["ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix"] as const;
type DetectLocalMode = (typeof DETECT_LOCAL_MODES)[number];

/** What Linux takes as an interface name (IFNAMSIZ less the NUL), nothing nft or iptables would parse. */
const INTERFACE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;

/** The pods' host-side interfaces: one bridge, or every interface whose name starts with a prefix. */
export interface PodInterface {
  readonly name: string;
  readonly prefix: boolean;
}

/** A --detect-local-mode value; throws an Error saying what to fix. */
function checkedMode(mode: string): DetectLocalMode {
  if (!(DETECT_LOCAL_MODES as readonly string[]).includes(mode))
    throw new Error(`"${mode}" is not one of ${DETECT_LOCAL_MODES.join(", ")}`);
  return mode as DetectLocalMode;
}

/** The checked --detect-local-mode; throws an Error naming the flag to fix. */
export function detectLocalMode(settings: TrafficAddressSettings): DetectLocalMode {
  return named("--detect-local-mode", () => checkedMode(settings.detectLocalMode ?? "ClusterCIDR"));
}

function podInterface(settings: TrafficAddressSettings, mode: DetectLocalMode): PodInterface | undefined {
  if (mode !== "BridgeInterface" && mode !== "InterfaceNamePrefix") return undefined;
  const bridge = mode === "BridgeInterface";
  const flag = bridge ? "--pod-bridge-interface" : "--pod-interface-name-prefix";
  const name = (bridge ? settings.podBridgeInterface : settings.podInterfaceNamePrefix)?.trim() ?? "";
  if (name === "") throw new Error(`${flag}: required with --detect-local-mode ${mode}`);
  if (!INTERFACE_NAME.test(name))
    throw new Error(`${flag}: "${name}" is not an interface name (up to 15 letters, digits, _ . -)`);
  return { name, prefix: !bridge };
}

/**
 * The flags of addTrafficAddressOptions as zod fields (commander's names), each checked, for a
 * backend's schema; `trafficSettings` turns the parsed fields into TrafficAddressSettings.
 */
export const trafficAddressFlags = {
  nodeportAddresses: z
    .string()
    .optional()
    .default("primary")
    .superRefine(checkedBy((text: string) => isPrimary(text) || parseNodePortCIDRs(text))),
  clusterCidr: z.string().optional().default("").superRefine(checkedBy(parseCIDRList)),
  detectLocalMode: z.string().optional().default("ClusterCIDR").superRefine(checkedBy(checkedMode)),
  podBridgeInterface: z.string().optional(),
  podInterfaceNamePrefix: z.string().optional(),
  masqueradeAll: switchFlag,
  masqueradeBit: z
    .union([z.string(), z.number()])
    .optional()
    .default("14")
    .superRefine(checkedBy(masqueradeMark)),
};

/** The parsed traffic flags under the names the backends use. */
export function trafficSettings(f: {
  readonly nodeportAddresses: string;
  readonly clusterCidr: string;
  readonly detectLocalMode: string;
  readonly podBridgeInterface?: string | undefined;
  readonly podInterfaceNamePrefix?: string | undefined;
  readonly masqueradeAll: boolean;
  readonly masqueradeBit: string | number;
}): TrafficAddressSettings {
  return {
    nodePortAddresses: f.nodeportAddresses,
    clusterCIDRs: f.clusterCidr,
    detectLocalMode: f.detectLocalMode,
    ...(f.podBridgeInterface !== undefined && { podBridgeInterface: f.podBridgeInterface }),
    ...(f.podInterfaceNamePrefix !== undefined && { podInterfaceNamePrefix: f.podInterfaceNamePrefix }),
    masqueradeAll: f.masqueradeAll,
    masqueradeBit: f.masqueradeBit,
  };
}

/**
 * Both families' node IPs, NodePort CIDRs and how pod traffic is told apart; throws an Error
 * naming a bad flag. `nodePodCIDRs` are the Node object's spec.podCIDRs (NodeCIDR mode).
 */
export function trafficAddresses(
  settings: TrafficAddressSettings,
  primaryIPs: readonly string[],
  nodePodCIDRs: readonly string[] = [],
): {
  readonly nodeIPs: string[];
  readonly nodePortCIDRs: string[];
  readonly podCIDRs: string[];
  readonly podInterface: PodInterface | undefined;
  readonly masqueradeMark: string;
} {
  const mode = detectLocalMode(settings);
  const clusterCIDRs = named("--cluster-cidr", () => parseCIDRList(settings.clusterCIDRs));
  const nodeIPs = primaryIPs.map(canonicalIP);
  const nodePortCIDRs = isPrimary(settings.nodePortAddresses)
    ? nodeIPs.map((ip) => `${ip}/${familyOf(ip) === "IPv4" ? 32 : 128}`)
    : named("--nodeport-addresses", () => parseNodePortCIDRs(settings.nodePortAddresses));
  return {
    nodeIPs,
    nodePortCIDRs,
    podCIDRs:
      mode === "ClusterCIDR" ? clusterCIDRs : mode === "NodeCIDR" ? nodePodCIDRs.map(canonicalCIDR) : [],
    podInterface: podInterface(settings, mode),
    masqueradeMark: named("--masquerade-bit", () => masqueradeMark(settings.masqueradeBit)),
  };
}

/** What one family's rules need of the settings: its NodePort CIDRs, pod CIDRs and node IPs. */
interface FamilyTraffic {
  readonly nodePortCIDRs: readonly string[];
  readonly podCIDRs: readonly string[];
  readonly podInterface?: PodInterface;
  readonly masqueradeAll: boolean;
  readonly masqueradeMark: string;
  readonly nodeIPs: readonly string[];
}

/** trafficAddresses split by family, for a backend's per-family configuration. */
export function trafficOfFamily(
  settings: TrafficAddressSettings,
  primaryIPs: readonly string[],
  nodePodCIDRs: readonly string[] = [],
): (family: IPFamily) => FamilyTraffic {
  const t = trafficAddresses(settings, primaryIPs, nodePodCIDRs);
  return (family) => ({
    nodePortCIDRs: ofFamily(t.nodePortCIDRs, family),
    podCIDRs: ofFamily(t.podCIDRs, family),
    ...(t.podInterface && { podInterface: t.podInterface }),
    masqueradeAll: settings.masqueradeAll,
    masqueradeMark: t.masqueradeMark,
    nodeIPs: ofFamily(t.nodeIPs, family),
  });
}
