// Turns the to-nft command-line options into one TableConfig per family. Pure apart from the
// node's addresses, which are passed in.

import { type TrafficAddressSettings, trafficOfFamily } from "../../host/traffic-addresses.ts";
import { ipFamilyOfNft, type NftFamily } from "../../model/ip.ts";
import type { TableConfig } from "./fragment.ts";
import { type NftOp, renderScript } from "./ops.ts";

export interface NftSettings extends TrafficAddressSettings {
  readonly table: string;
}

/** What nft accepts as a table name without quoting. */
export const TABLE_NAME = /^[A-Za-z][A-Za-z0-9_-]*$/;

/**
 * Throws an Error naming the flag to fix when an option is wrong. `nodePodCIDRs`: the Node's
 * spec.podCIDRs, the pod CIDRs with --detect-local-mode NodeCIDR.
 */
export function tableConfigs(
  settings: NftSettings,
  primaryIPs: readonly string[],
  nodePodCIDRs: readonly string[] = [],
): TableConfig[] {
  if (!TABLE_NAME.test(settings.table)) {
    throw new Error(`--table-name: "${settings.table}" is not a valid nft table name`);
  }
  const traffic = trafficOfFamily(settings, primaryIPs, nodePodCIDRs);
  return (["ip", "ip6"] as NftFamily[]).map((family) => ({
    family,
    table: settings.table,
    ...traffic(ipFamilyOfNft(family)),
  }));
}

/** Removes kpng's tables (both families) and nothing else; missing tables are fine. */
export function cleanupTransaction(table: string): string {
  // nft 1.0.6 has no `destroy`: add-then-delete deletes whether or not the table existed.
  const ops: NftOp[] = [
    { verb: "add", kind: "table" },
    { verb: "delete", kind: "table" },
  ];
  return (["ip", "ip6"] as const).map((family) => renderScript(ops, family, table).text).join("");
}
