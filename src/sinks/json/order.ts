// Orders endpoints the way people read addresses: IPv4 before IPv6, then by address value (so
// .9 comes before .10), then by port.

import ipaddr from "ipaddr.js";

export function compareEndpoints(
  a: { readonly ip: string; readonly port: number },
  b: { readonly ip: string; readonly port: number },
): number {
  return compareAddresses(a.ip, b.ip) || a.port - b.port;
}

export function compareAddresses(a: string, b: string): number {
  const ba = addressBytes(a);
  const bb = addressBytes(b);
  if (ba === undefined || bb === undefined) {
    // Not an IP (cannot come from the brain, which validated them): plain text order, last.
    if (ba !== bb) return ba === undefined ? 1 : -1;
    return a < b ? -1 : a > b ? 1 : 0;
  }
  if (ba.length !== bb.length) return ba.length - bb.length;
  for (let i = 0; i < ba.length; i++) {
    const d = (ba[i] ?? 0) - (bb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

function addressBytes(ip: string): number[] | undefined {
  return ipaddr.isValid(ip) ? ipaddr.parse(ip).toByteArray() : undefined;
}
