// An EndpointSlice endpoint with one address, as the API writes nearly all of them. A cluster of
// 100k Services holds a million endpoints for as long as the store lives, and every page they
// fill is a first touch of memory (docs/performance.md, "What a page fault costs here"): kept as
// its address, without a list around it, and with its two hint lists in one shared object when
// it has none, an endpoint is one object of seven fields instead of one of eight and a list.
//
// It reads as any SliceEndpoint does. Its `addresses` is a new list at every read: code that
// only wants the address reads firstAddress. A spread (`{ ...ep }`) copies its fields, not its
// getters: withConditions makes a changed copy.

import type { EndpointConditions, SliceEndpoint } from "./kube.ts";

interface EndpointHints {
  readonly zoneHints: readonly string[];
  readonly nodeHints: readonly string[];
}

const NO_NAMES: readonly string[] = Object.freeze([]);
const NO_HINTS: EndpointHints = Object.freeze({ zoneHints: NO_NAMES, nodeHints: NO_NAMES });

/** The hint lists in one object; one shared object when both are empty. */
export function endpointHints(zoneHints: readonly string[], nodeHints: readonly string[]): EndpointHints {
  return zoneHints.length === 0 && nodeHints.length === 0 ? NO_HINTS : { zoneHints, nodeHints };
}

export class OneAddressEndpoint implements SliceEndpoint {
  readonly address: string;
  readonly conditions: EndpointConditions;
  readonly hostname: string;
  readonly nodeName: string;
  readonly zone: string;
  readonly hints: EndpointHints;
  readonly podName: string;

  constructor(
    address: string,
    conditions: EndpointConditions,
    hostname: string,
    nodeName: string,
    zone: string,
    hints: EndpointHints,
    podName: string,
  ) {
    this.address = address;
    this.conditions = conditions;
    this.hostname = hostname;
    this.nodeName = nodeName;
    this.zone = zone;
    this.hints = hints;
    this.podName = podName;
  }

  get addresses(): readonly string[] {
    return [this.address];
  }

  get zoneHints(): readonly string[] {
    return this.hints.zoneHints;
  }

  get nodeHints(): readonly string[] {
    return this.hints.nodeHints;
  }

  /** The endpoint with SliceEndpoint's fields, as JSON documents of the store show it. */
  toJSON(): SliceEndpoint {
    const { addresses, conditions, hostname, nodeName, zone, zoneHints, nodeHints, podName } = this;
    return { addresses, conditions, hostname, nodeName, zone, zoneHints, nodeHints, podName };
  }
}

/** The endpoint's first address, the one a proxy uses; undefined when it has none. */
export function firstAddress(ep: SliceEndpoint): string | undefined {
  return ep instanceof OneAddressEndpoint ? ep.address : ep.addresses[0];
}

/** The endpoint with other conditions. */
export function withConditions(ep: SliceEndpoint, conditions: EndpointConditions): SliceEndpoint {
  if (!(ep instanceof OneAddressEndpoint)) return { ...ep, conditions };
  return new OneAddressEndpoint(
    ep.address,
    conditions,
    ep.hostname,
    ep.nodeName,
    ep.zone,
    ep.hints,
    ep.podName,
  );
}
