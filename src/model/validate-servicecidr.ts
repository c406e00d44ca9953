// networking.k8s.io ServiceCIDR (v1, or v1beta1 where v1 is not served): raw JSON → ServiceCIDR.
// The API server accepts one or two CIDRs, at most one per family, written with their host bits
// cleared; a file or an older server may hold anything, so the same rules are checked here.

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
    if (families.has(cidr.family)) throw new InvalidField(`${path}: a second ${cidr.family} CIDR`);
    families.add(cidr.family);
    return cidr.text;
  });
  return { kind: "ServiceCIDR", metadata, cidrs };
}
