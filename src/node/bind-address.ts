// "host:port" flags of the node servers (--healthz-bind-address, --metrics-bind-address), parsed
// up front so a bad value stops the command before anything starts.

import { isIP } from "node:net";
import { type HostPort, splitHostPort } from "../lib/host-port.ts";

export type BindAddress = HostPort;

/** "0.0.0.0:10256", "[::]:10256", "127.0.0.1:0"; "" means the server is off (undefined). */
export function parseBindAddress(text: string): BindAddress | undefined {
  const trimmed = text.trim();
  if (trimmed === "") return undefined;
  const address = splitHostPort(trimmed);
  if (address === undefined || isIP(address.host) === 0) {
    throw new Error(`"${text}" is not an address such as 0.0.0.0:10256 or [::]:10256`);
  }
  return address;
}
