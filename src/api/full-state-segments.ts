// A full state, built from segments shared between nodes. Nodes of one zone hold the same
// LocalService object for every service but the ~1% whose endpoints run on them, so cutting the
// sorted services into runs of SEGMENT and caching each run's frames by the identity of its
// members lets most runs of most nodes reuse bytes already built: a full state becomes ~1,000
// large frames instead of ~20,000 small ones, built mostly without touching the services.

import type { LocalService } from "../model/local.ts";
import { concatFrames, type Frame } from "./frames.ts";

/** Services per segment: small enough that most segments hold none of a node's own services. */
const SEGMENT = 16;
/** Variants kept per segment position: one per zone, plus room for a few being tried. */
const VARIANTS = 8;

interface SegmentEncoding {
  readonly service: Frame;
  /** Every endpoint's Set op in path order (possibly empty). */
  readonly endpointSets: Frame;
}

interface SegmentVariant {
  readonly members: readonly LocalService[];
  /**
   * Service Set ops of the members, back to back; then their endpoint Set ops. Built when the
   * variant is seen a second time: a node's own variant, seen once, is never copied.
   */
  built: { readonly services: Frame; readonly endpoints: Frame } | undefined;
  /** The full state that used it last (a count of full states built). */
  lastUse: number;
}

export class FullStateSegments {
  readonly #encode: (service: LocalService) => SegmentEncoding;
  /** By segment position in the sorted services; a variant matches by its members' identity. */
  readonly #variants: SegmentVariant[][] = [];
  #uses = 0;

  constructor(encode: (service: LocalService) => SegmentEncoding) {
    this.#encode = encode;
  }

  /**
   * The frames of `sorted` (services in key order): every service's Set op, then every
   * service's endpoint Set ops, in the same order as encoding them one by one gives.
   */
  frames(sorted: readonly LocalService[]): { services: Frame[]; endpoints: Frame[] } {
    this.#uses++;
    const services: Frame[] = [];
    const endpoints: Frame[] = [];
    for (let start = 0, position = 0; start < sorted.length; start += SEGMENT, position++) {
      const end = Math.min(start + SEGMENT, sorted.length);
      const variant = this.#variant(position, sorted, start, end);
      if (variant.built === undefined) {
        const encoded = variant.members.map(this.#encode);
        for (const e of encoded) services.push(e.service);
        for (const e of encoded) if (e.endpointSets.length > 0) endpoints.push(e.endpointSets);
      } else {
        services.push(variant.built.services);
        if (variant.built.endpoints.length > 0) endpoints.push(variant.built.endpoints);
      }
    }
    return { services, endpoints };
  }

  #variant(position: number, sorted: readonly LocalService[], start: number, end: number): SegmentVariant {
    let list = this.#variants[position];
    if (list === undefined) {
      list = [];
      this.#variants[position] = list;
    }
    for (let v = 0; v < list.length; v++) {
      const variant = list[v]!;
      if (sameMembers(variant.members, sorted, start, end)) {
        variant.lastUse = this.#uses;
        // Most recently used first: the zone's variant is then found first, not after the
        // nodes' own variants tried before it.
        if (v > 0) {
          list.copyWithin(1, 0, v);
          list[0] = variant;
        }
        if (variant.built === undefined) {
          const encoded = variant.members.map(this.#encode);
          variant.built = {
            services: concatFrames(encoded.map((e) => e.service)),
            endpoints: concatFrames(encoded.map((e) => e.endpointSets).filter((f) => f.length > 0)),
          };
        }
        return variant;
      }
    }
    const variant: SegmentVariant = {
      members: sorted.slice(start, end),
      built: undefined,
      lastUse: this.#uses,
    };
    if (list.length >= VARIANTS) {
      // The least recently used goes. A zone's variant is used again within a few full states
      // (the nodes between hold other zones' variants or their own), a node's own variant not.
      let victim = 0;
      for (let i = 1; i < list.length; i++) if (list[i]!.lastUse < list[victim]!.lastUse) victim = i;
      list.splice(victim, 1);
    }
    list.push(variant);
    return variant;
  }
}

function sameMembers(
  members: readonly LocalService[],
  sorted: readonly LocalService[],
  start: number,
  end: number,
): boolean {
  if (members.length !== end - start) return false;
  for (let i = start; i < end; i++) if (members[i - start] !== sorted[i]) return false;
  return true;
}
