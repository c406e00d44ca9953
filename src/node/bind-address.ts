// "host:port" flags of the node servers (--healthz-bind-address, --metrics-bind-address), parsed
// up front so a bad value stops the command before anything starts.

import { isIP } from "node:net";
import { UsageError } from "../plugin/usage-error.ts";

export interface BindAddress {
  readonly host: string;
  readonly port: number;
}

/** "0.0.0.0:10256", "[::]:10256", "127.0.0.1:0"; "" means the server is off (undefined). */
export function parseBindAddress(text: string, flag: string): BindAddress | undefined {
  const trimmed = text.trim();
  if (trimmed === "") return undefined;
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(trimmed) ?? /^([^:]+):(\d{1,5})$/.exec(trimmed);
  const host = m?.[1];
  const port = Number(m?.[2]);
  if (host === undefined || isIP(host) === 0 || !Number.isInteger(port) || port > 65535) {
    throw new UsageError(`${flag}: "${text}" is not an address such as 0.0.0.0:10256 or [::]:10256`);
  }
  return { host, port };
}
