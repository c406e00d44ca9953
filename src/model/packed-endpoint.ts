// The LocalEndpoint the brain makes. A local state at 100k Services holds millions of endpoints,
// and every page they fill is a first touch of memory (docs/performance.md, "What a page fault
// costs here"): with its port and five flags in one number an endpoint is a header and two
// fields, not seven, and every one of them has the same shape.

import type { LocalEndpoint } from "./local.ts";

const LOCAL = 1;
const READY = 2;
const SERVING = 4;
const TERMINATING = 8;
const NODE_UNKNOWN = 16;

interface EndpointFlags {
  readonly local: boolean;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  /** The EndpointSlice names no node for the endpoint (LocalEndpoint.nodeUnknown). */
  readonly nodeUnknown: boolean;
}

/** The flags take the low bits of `bits`, the port the bits above them. */
const PORT_SHIFT = 5;
const FLAG_MASK = (1 << PORT_SHIFT) - 1;

export class PackedEndpoint implements LocalEndpoint {
  readonly ip: string;
  /**
   * The port and the five flags in one number (a port needs 16 bits, the flags 5): read them by
   * name. Public so that comparing two endpoints field by field compares them too.
   */
  readonly bits: number;

  constructor(ip: string, port: number, flags: EndpointFlags) {
    this.ip = ip;
    this.bits =
      port * (FLAG_MASK + 1) +
      ((flags.local ? LOCAL : 0) |
        (flags.ready ? READY : 0) |
        (flags.serving ? SERVING : 0) |
        (flags.terminating ? TERMINATING : 0) |
        (flags.nodeUnknown ? NODE_UNKNOWN : 0));
  }

  get port(): number {
    return this.bits >>> PORT_SHIFT;
  }

  get local(): boolean {
    return (this.bits & LOCAL) !== 0;
  }

  get ready(): boolean {
    return (this.bits & READY) !== 0;
  }

  get serving(): boolean {
    return (this.bits & SERVING) !== 0;
  }

  get terminating(): boolean {
    return (this.bits & TERMINATING) !== 0;
  }

  get nodeUnknown(): true | undefined {
    return (this.bits & NODE_UNKNOWN) !== 0 ? true : undefined;
  }

  /** The endpoint as a plain object with LocalEndpoint's fields, as JSON and comparisons see it. */
  toJSON(): LocalEndpoint {
    const { ip, port, local, ready, serving, terminating } = this;
    return this.nodeUnknown
      ? { ip, port, local, ready, serving, terminating, nodeUnknown: true }
      : { ip, port, local, ready, serving, terminating };
  }
}
