// The one reader of "host:port" text, as every listen and dial flag takes it: "127.0.0.1:80",
// "[::1]:80", ":80" (host left empty for the caller's default). Callers add their own rules
// (an IP only, a non-zero port) and their own error message.

export interface HostPort {
  /** Without brackets; "" when the text started with ":". */
  readonly host: string;
  readonly port: number;
}

const HOST_PORT = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]/]*)):(\d{1,5})$/;

/** The host and port of `text`, or undefined when it is not host:port with a port of 0–65535. */
export function splitHostPort(text: string): HostPort | undefined {
  const m = HOST_PORT.exec(text);
  if (m === null) return undefined;
  const port = Number(m[3]);
  if (port > 65535) return undefined;
  return { host: m[1] ?? m[2] ?? "", port };
}

/** host:port again, with brackets around an IPv6 host. */
export function joinHostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}
