// Family configs for the iptables backend tests; the local-state builders are the nft tests' ones
// (they only build model objects).

import type { FamilySettings } from "../../../../src/backend-core/family-settings.ts";

export { ep, manyServices, port, service, state } from "../nft/fixtures.ts";

export const V4: FamilySettings = {
  family: "IPv4",
  nodePortCIDRs: ["192.0.2.1/32"],
  podCIDRs: ["10.244.0.0/16"],
  masqueradeAll: false,
  nodeIPs: ["192.0.2.1"],
};

export const V6: FamilySettings = {
  family: "IPv6",
  nodePortCIDRs: ["2001:db8::1/128"],
  podCIDRs: ["2001:db8:244::/64"],
  masqueradeAll: false,
  nodeIPs: ["2001:db8::1"],
};
