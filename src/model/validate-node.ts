// core/v1 Node: raw JSON → Node (labels, addresses and pod CIDRs).

import {
  InvalidField,
  object,
  optionalArray,
  optionalObject,
  optionalString,
  type RawObject,
  requiredString,
} from "./field-reader.ts";
import { canonicalAddress, familyOfAddress, parseCidr } from "./ip.ts";
import { type Node, type NodeAddress, TAINT_TO_BE_DELETED } from "./kube.ts";
import { checkKind, readMetadata } from "./validate-meta.ts";

/** Address types whose value is an IP; Hostname and the DNS types hold names. */
const IP_ADDRESS_TYPES = new Set(["InternalIP", "ExternalIP"]);

function readAddress(raw: unknown, path: string): NodeAddress {
  const a = object(raw, path);
  const type = requiredString(a.type, `${path}.type`);
  const address = requiredString(a.address, `${path}.address`);
  if (IP_ADDRESS_TYPES.has(type) && familyOfAddress(address) === undefined) {
    throw new InvalidField(
      `${path}.address: ${JSON.stringify(address)} is not a valid IP address for type ${type}`,
    );
  }
  return { type, address: IP_ADDRESS_TYPES.has(type) ? (canonicalAddress(address) ?? address) : address };
}

function readCidr(value: unknown, path: string): string {
  const text = requiredString(value, path);
  if (parseCidr(text) === undefined) throw new InvalidField(`${path}: ${JSON.stringify(text)} is not a CIDR`);
  return text;
}

export function readNode(raw: RawObject): Node {
  checkKind(raw, "Node", ["v1"]);
  const metadata = readMetadata(raw, false, "");
  const spec = optionalObject(raw.spec, "spec");
  const status = optionalObject(raw.status, "status");
  let podCIDRs = optionalArray(spec.podCIDRs, "spec.podCIDRs").map((c, i) =>
    readCidr(c, `spec.podCIDRs[${i}]`),
  );
  const podCIDR = optionalString(spec.podCIDR, "spec.podCIDR");
  // Older API servers and hand-written files may only set the singular field.
  if (podCIDRs.length === 0 && podCIDR !== "") podCIDRs = [readCidr(podCIDR, "spec.podCIDR")];
  const meta = optionalObject(raw.metadata, "metadata");
  const tainted = optionalArray(spec.taints, "spec.taints").some(
    (t) => typeof t === "object" && t !== null && (t as { key?: unknown }).key === TAINT_TO_BE_DELETED,
  );
  const beingDeleted = tainted || optionalString(meta.deletionTimestamp, "metadata.deletionTimestamp") !== "";
  return {
    kind: "Node",
    metadata,
    addresses: optionalArray(status.addresses, "status.addresses").map((a, i) =>
      readAddress(a, `status.addresses[${i}]`),
    ),
    podCIDRs,
    ...(beingDeleted ? { beingDeleted: true as const } : {}),
  };
}
