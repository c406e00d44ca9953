// EndpointSlices of one service → per slice port, the endpoints of one IP family, the way
// kube-proxy's endpoint slice cache merges them.

import type { EndpointSlice, IPFamily, Protocol, SliceEndpoint } from "../model/kube.ts";
import type { LocalEndpoint } from "../model/local.ts";
import { compareEndpoints, inStrictAddressOrder, inStrictEndpointOrder } from "../model/order.ts";
import { firstAddress } from "../model/slice-endpoint.ts";

/** One endpoint of one port, with the slice's conditions read with their defaults. */
export interface EndpointInfo {
  readonly ip: string;
  readonly port: number;
  readonly nodeName: string;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly zoneHints: readonly string[];
  readonly nodeHints: readonly string[];
  /**
   * What the nodes make of it (see local-service.ts): one object as the node it runs on sees it,
   * one as every other node does, shared by a port's internal and external lists and by the
   * computations of every node.
   */
  onItsNode?: LocalEndpoint | undefined;
  elsewhere?: LocalEndpoint | undefined;
}

/**
 * The EndpointInfo mergeEndpoints makes: the slice's endpoint and the port, read through. A
 * million of them at 100k Services, each made for every computation of its Service: five fields
 * instead of a copy of ten.
 */
class MergedEndpoint implements EndpointInfo {
  readonly ip: string;
  readonly port: number;
  readonly #endpoint: SliceEndpoint;
  // Declared here, undefined until made: a property added later would give each of a million
  // objects another shape and a second allocation.
  onItsNode: LocalEndpoint | undefined = undefined;
  elsewhere: LocalEndpoint | undefined = undefined;

  constructor(ip: string, port: number, endpoint: SliceEndpoint) {
    this.ip = ip;
    this.port = port;
    this.#endpoint = endpoint;
  }

  get nodeName(): string {
    return this.#endpoint.nodeName;
  }

  get ready(): boolean {
    return this.#endpoint.conditions.ready !== false;
  }

  get serving(): boolean {
    return this.#endpoint.conditions.serving !== false;
  }

  get terminating(): boolean {
    return this.#endpoint.conditions.terminating === true;
  }

  get zoneHints(): readonly string[] {
    return this.#endpoint.zoneHints;
  }

  get nodeHints(): readonly string[] {
    return this.#endpoint.nodeHints;
  }
}

/** The merged endpoints of one slice port: Service ports take them by name and protocol. */
export interface PortEndpoints {
  readonly name: string;
  readonly protocol: Protocol;
  readonly endpoints: readonly EndpointInfo[];
}

/** A port's entry while the slices are merged. */
interface MergingPort {
  readonly name: string;
  readonly protocol: Protocol;
  endpoints: EndpointInfo[];
  /** Whether the list is one slice's endpoints in address order: no sort at the end. */
  inOrder: boolean;
}

const NO_ENDPOINTS: readonly EndpointInfo[] = Object.freeze([]);

/** The endpoints of the Service port `port` (by name and protocol); none when no slice has it. */
export function endpointsOfPort(
  merged: readonly PortEndpoints[],
  port: { readonly name: string; readonly protocol: Protocol },
): readonly EndpointInfo[] {
  return portNamed(merged, port.name, port.protocol)?.endpoints ?? NO_ENDPOINTS;
}

/** The entry of the port `name`/`protocol` in `ports`, if any. */
function portNamed<P extends { readonly name: string; readonly protocol: Protocol }>(
  ports: readonly P[],
  name: string,
  protocol: Protocol,
): P | undefined {
  // A Service has a few ports: a look through them costs less than a key string per lookup.
  for (const p of ports) if (p.name === name && p.protocol === protocol) return p;
  return undefined;
}

/**
 * Per slice port (name and protocol), its endpoints over every slice, sorted by ip then port.
 * Rules:
 * - only slices whose addressType is the family (FQDN slices never match);
 * - slice ports with no name, or no/0 port, are skipped;
 * - endpoints without addresses are skipped, and only addresses[0] is used;
 * - unset ready/serving read as true, unset terminating as false;
 * - the same ip:port seen twice (across slices or pods): a non-terminating copy wins, and among
 *   copies alike the last seen.
 */
export function mergeEndpoints(slices: readonly EndpointSlice[], family: IPFamily): readonly PortEndpoints[] {
  const out: MergingPort[] = [];
  for (const slice of slices) {
    if (slice.addressType !== family) continue;
    let lists = 0;
    let sliceInOrder: boolean | undefined;
    for (const port of slice.ports) {
      const { name, protocol } = port;
      if (name === null || port.port === null || port.port === 0) continue;
      let merging = portNamed(out, name, protocol);
      if (merging === undefined) {
        if (sliceInOrder === undefined)
          sliceInOrder = slice.inAddressOrder ?? inStrictAddressOrder(slice.endpoints);
        merging = { name, protocol, endpoints: [], inOrder: sliceInOrder };
        out.push(merging);
      } else merging.inOrder = false;
      SLICE_LISTS[lists] = merging.endpoints;
      SLICE_PORTS[lists] = port.port;
      lists++;
    }
    // Each endpoint's address read once for all of the slice's ports.
    for (const ep of slice.endpoints) {
      const ip = firstAddress(ep);
      if (ip === undefined) continue;
      for (let i = 0; i < lists; i++)
        (SLICE_LISTS[i] as EndpointInfo[]).push(new MergedEndpoint(ip, SLICE_PORTS[i] as number, ep));
    }
    SLICE_LISTS.fill(undefined, 0, lists);
  }
  for (const p of out) if (!p.inOrder) p.endpoints = sortedUnique(p.endpoints);
  return out;
}

/** One slice's lists and target ports, by its ports in order (reused: mergeEndpoints never nests). */
const SLICE_LISTS: (EndpointInfo[] | undefined)[] = [];
const SLICE_PORTS: number[] = [];

/**
 * Sorted by ip then port, one copy of each ip:port. Slices usually list their endpoints in order
 * and without copies: that is checked in one pass and costs no sort.
 */
function sortedUnique(endpoints: EndpointInfo[]): EndpointInfo[] {
  if (inStrictEndpointOrder(endpoints)) return endpoints;
  // A stable sort keeps the copies of one ip:port in the order they were seen.
  endpoints.sort(compareEndpoints);
  const out: EndpointInfo[] = [];
  for (let i = 0; i < endpoints.length; ) {
    let j = i + 1;
    while (
      j < endpoints.length &&
      compareEndpoints(endpoints[i] as EndpointInfo, endpoints[j] as EndpointInfo) === 0
    )
      j++;
    out.push(winner(endpoints, i, j));
    i = j;
  }
  return out;
}

/** Among the copies [from, to) in the order seen: the last non-terminating one, else the first. */
function winner(copies: readonly EndpointInfo[], from: number, to: number): EndpointInfo {
  for (let k = to - 1; k > from; k--)
    if (!(copies[k] as EndpointInfo).terminating) return copies[k] as EndpointInfo;
  return copies[from] as EndpointInfo;
}
