// A watch request the server will not serve, with the gRPC status that says why: the stream ends
// with it instead of INTERNAL, and the client sees a reason it can act on.

export class StreamRejection extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = "StreamRejection";
    this.status = status;
  }
}

/** A Node name as the API server accepts it: a DNS subdomain (RFC 1123), at most 253 characters. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function isValidNodeName(name: string): boolean {
  return name.length > 0 && name.length <= 253 && DNS_SUBDOMAIN.test(name);
}
