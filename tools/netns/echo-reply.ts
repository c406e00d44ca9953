// The one-line JSON answer of the echo server: who answered and whom it saw.

export interface EchoReply {
  /** The server's name (the pod name). */
  readonly name: string;
  readonly proto: "tcp" | "udp";
  /** The peer as the server saw it (after any NAT on the way). */
  readonly client: { readonly address: string; readonly port: number };
  /** The address and port the request arrived on (address "" for UDP, which does not know it). */
  readonly server: { readonly address: string; readonly port: number };
}

/** Parses one answer line; undefined when it is not an echo reply. */
export function parseEchoReply(line: string): EchoReply | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.name !== "string" || (v.proto !== "tcp" && v.proto !== "udp")) return undefined;
  const client = hostPort(v.client);
  const server = hostPort(v.server);
  if (client === undefined || server === undefined) return undefined;
  return { name: v.name, proto: v.proto, client, server };
}

/** An IPv4 peer seen on a dual-stack socket shows as ::ffff:a.b.c.d; report it as a.b.c.d. */
export function unmapAddress(address: string): string {
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}

function hostPort(value: unknown): { address: string; port: number } | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const { address, port } = value as Record<string, unknown>;
  return typeof address === "string" && typeof port === "number" ? { address, port } : undefined;
}
