// A watch request the server will not serve, with the gRPC status that says why: the stream ends
// with it instead of INTERNAL, and the client sees a reason it can act on.

import { isDnsSubdomain } from "../model/validate-meta.ts";

export class StreamRejection extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = "StreamRejection";
    this.status = status;
  }
}

/** A Node name as the API server accepts it. */
export const isValidNodeName = isDnsSubdomain;
