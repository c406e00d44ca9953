// networking.k8s.io ServiceCIDR (v1, or v1beta1 where v1 is not served): raw JSON → ServiceCIDR.
// The API server accepts one or two CIDRs, at most one per family, written with their host bits
// cleared; a file or an older server may hold anything, so the same rules are checked here.
// One rule more than the API server's: a range of prefix 0 is refused. It covers every address
// (it is a default route), and dropping traffic to unallocated Service addresses in it would cut
// every connection the node and its pods open to anything that is not a Service.

import {
  InvalidField,
  optionalArray,
  optionalObject,
  type RawObject,
  requiredString,
} from "./field-reader.ts";
import { parseCidr } from "./ip.ts";
import type { IPFamily, ServiceCIDR } from "./kube.ts";
import { checkKind, readMetadata } from "./validate-meta.ts";

const SERVICE_CIDR_API_VERSIONS = ["networking.k8s.io/v1", "networking.k8s.io/v1beta1"] as const;

export function readServiceCIDR(raw: RawObject): ServiceCIDR {
  checkKind(raw, "ServiceCIDR", SERVICE_CIDR_API_VERSIONS);
  const metadata = readMetadata(raw, false, "");
  const spec = optionalObject(raw.spec, "spec");
  const list = optionalArray(spec.cidrs, "spec.cidrs");
  if (list.length === 0 || list.length > 2) {
    throw new InvalidField(`spec.cidrs: expected one or two CIDRs (one per family), got ${list.length}`);
  }
  const families = new Set<IPFamily>();
  const cidrs = list.map((value, i) => {
    const path = `spec.cidrs[${i}]`;
    const text = requiredString(value, path);
    const cidr = parseCidr(text);
    if (cidr === undefined) throw new InvalidField(`${path}: ${JSON.stringify(text)} is not a CIDR`);
    if (cidr.text !== text) {
      throw new InvalidField(
        `${path}: ${JSON.stringify(text)} has host bits set (the network is ${cidr.text})`,
      );
    }
    const wholeFamily = defaultRouteReason(cidr);
    if (wholeFamily !== undefined) throw new InvalidField(`${path}: ${wholeFamily}`);
    if (families.has(cidr.family)) throw new InvalidField(`${path}: a second ${cidr.family} CIDR`);
    families.add(cidr.family);
    return cidr.text;
  });
  return { kind: "ServiceCIDR", metadata, cidrs };
}

/** Why a range cannot be a Service range because it is a default route; undefined when it is not. */
export function defaultRouteReason(cidr: {
  readonly family: IPFamily;
  readonly text: string;
}): string | undefined {
  if (!cidr.text.endsWith("/0")) return undefined;
  return `${cidr.text} covers every ${cidr.family} address (a default route), not a Service IP range`;
}
