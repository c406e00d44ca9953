// The nft table family of each IP family: one table each.

import type { IPFamily } from "../../model/kube.ts";
import type { NftFamily } from "./fragment.ts";

/** The IP family an nft table family programs. */
export function ipFamilyOfTable(family: NftFamily): IPFamily {
  return family === "ip" ? "IPv4" : "IPv6";
}
