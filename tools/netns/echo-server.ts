// A TCP + UDP echo server for a pod namespace. Each TCP connection and each UDP datagram gets one
// JSON line (see echo-reply.ts) naming this server and the client address it saw, which is how
// tests and the demo tell which endpoint answered and whether the source was NATed.
//
//   node tools/netns/echo-server.ts --name web-1 --port 8080 [--port 8081] [--udp-port 5353]
//
// Prints `listening {...}` on stdout once every socket is bound.

import dgram from "node:dgram";
import net from "node:net";
import { parseArgs } from "node:util";
import { type EchoReply, unmapAddress } from "./echo-reply.ts";

export interface EchoServerOptions {
  readonly name: string;
  readonly tcpPorts: readonly number[];
  readonly udpPorts: readonly number[];
}

export interface RunningEchoServer {
  /** The bound ports, in option order (differs from the options only for port 0). */
  readonly tcpPorts: readonly number[];
  readonly udpPorts: readonly number[];
  close(): Promise<void>;
}

/** Binds every port on `::` with dual stack, so IPv4 and IPv6 clients both reach it. */
export async function startEchoServer(opts: EchoServerOptions): Promise<RunningEchoServer> {
  const closers: (() => Promise<void>)[] = [];
  const tcpPorts: number[] = [];
  const udpPorts: number[] = [];
  for (const port of opts.tcpPorts) {
    const server = net.createServer((socket) => {
      socket.on("error", () => {});
      const reply: EchoReply = {
        name: opts.name,
        proto: "tcp",
        client: { address: unmapAddress(socket.remoteAddress ?? ""), port: socket.remotePort ?? 0 },
        server: { address: unmapAddress(socket.localAddress ?? ""), port: socket.localPort ?? 0 },
      };
      socket.end(`${JSON.stringify(reply)}\n`);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ host: "::", port, ipv6Only: false }, resolve);
    });
    closers.push(() => new Promise((resolve) => server.close(() => resolve())));
    tcpPorts.push((server.address() as net.AddressInfo).port);
  }
  for (const port of opts.udpPorts) {
    const socket = dgram.createSocket({ type: "udp6", ipv6Only: false });
    socket.on("message", (_msg, rinfo) => {
      const reply: EchoReply = {
        name: opts.name,
        proto: "udp",
        client: { address: unmapAddress(rinfo.address), port: rinfo.port },
        server: { address: "", port: socket.address().port },
      };
      socket.send(`${JSON.stringify(reply)}\n`, rinfo.port, rinfo.address);
    });
    await new Promise<void>((resolve, reject) => {
      socket.once("error", reject);
      socket.bind({ address: "::", port }, () => resolve());
    });
    socket.on("error", () => {});
    closers.push(() => new Promise((resolve) => socket.close(() => resolve())));
    udpPorts.push(socket.address().port);
  }
  return { tcpPorts, udpPorts, close: async () => void (await Promise.all(closers.map((c) => c()))) };
}

/** Parses the command line of the script form. Throws with a usage message when it is wrong. */
export function parseEchoServerArgs(args: readonly string[]): EchoServerOptions {
  const { values } = parseArgs({
    args: [...args],
    options: {
      name: { type: "string" },
      port: { type: "string", multiple: true, default: [] },
      "udp-port": { type: "string", multiple: true, default: [] },
    },
  });
  const usage = "usage: echo-server.ts --name NAME --port P [--port P…] [--udp-port U…]";
  if (values.name === undefined || values.name === "") throw new Error(`--name is required; ${usage}`);
  const tcpPorts = values.port.map((p) => parsePort(p, usage));
  const udpPorts = values["udp-port"].map((p) => parsePort(p, usage));
  if (tcpPorts.length + udpPorts.length === 0) throw new Error(`no port given; ${usage}`);
  return { name: values.name, tcpPorts, udpPorts };
}

function parsePort(text: string, usage: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`bad port ${text}; ${usage}`);
  return port;
}

/** The script entry point: runs until SIGTERM/SIGINT. */
export async function echoServerMain(args: readonly string[]): Promise<void> {
  let opts: EchoServerOptions;
  try {
    opts = parseEchoServerArgs(args);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const server = await startEchoServer(opts);
  process.stdout.write(`listening ${JSON.stringify(opts)}\n`);
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.once(signal, () => void server.close().then(() => process.exit(0)));
  }
}

if (import.meta.main) await echoServerMain(process.argv.slice(2));
