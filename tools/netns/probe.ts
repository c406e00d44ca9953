// Client requests sent from inside a namespace: TCP connect + read one line, or one UDP datagram
// and its answer. A failure is classified, because tests need to tell a rejected connection
// (`refused`: a RST or an ICMP port unreachable) from a dropped one (`timeout`).
//
// Run as a script, it reads a ProbeBatch as JSON on stdin and writes ProbeResult[] as JSON on
// stdout, so one process (spawned with `ip netns exec`) does many requests.

import dgram from "node:dgram";
import { writeFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { type EchoReply, parseEchoReply } from "./echo-reply.ts";

export interface ProbeRequest {
  readonly proto: "tcp" | "udp";
  readonly host: string;
  readonly port: number;
  /** Default 1000 ms. */
  readonly timeoutMs?: number;
  /** Bind the client socket to this source address. */
  readonly localAddress?: string;
  /** Bind the client socket to this source port. */
  readonly localPort?: number;
  /** UDP: send with sendto() on an unconnected socket (no connect()); errors come from the send. */
  readonly unconnected?: boolean;
}

export type ProbeFailure = "refused" | "timeout" | "unreachable" | "reset" | "closed" | "other";

export type ProbeResult =
  | {
      readonly ok: true;
      /** The first line received. */
      readonly answer: string;
      /** The answer parsed as an echo reply, when it is one. */
      readonly reply: EchoReply | undefined;
      readonly ms: number;
      /** TCP: the peer address the client's socket reports (getpeername); UDP: where the answer came from. */
      readonly peer?: string;
      /** UDP: the port the answer came from (recvmsg's source address). */
      readonly peerPort?: number;
    }
  | { readonly ok: false; readonly failure: ProbeFailure; readonly message: string; readonly ms: number };

export interface ProbeBatch {
  readonly requests: readonly ProbeRequest[];
  /** How many requests run at the same time; default 16. */
  readonly concurrency?: number;
  /**
   * A cgroup v2 directory the probing process joins first: a node-local client or pod whose
   * sockets the eBPF backend's cgroup programs balance.
   */
  readonly cgroup?: string;
}

/** Sends one request and never rejects: every failure becomes a classified result. */
export function probe(req: ProbeRequest): Promise<ProbeResult> {
  return req.proto === "tcp" ? probeTcp(req) : probeUdp(req);
}

/** Runs a batch with bounded concurrency; results are in request order. */
export async function probeAll(batch: ProbeBatch): Promise<ProbeResult[]> {
  const results: ProbeResult[] = new Array(batch.requests.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < batch.requests.length) {
      const i = next++;
      const req = batch.requests[i];
      if (req !== undefined) results[i] = await probe(req);
    }
  };
  const workers = Math.max(1, Math.min(batch.concurrency ?? 16, batch.requests.length));
  await Promise.all(Array.from({ length: workers }, worker));
  return results;
}

/** Maps a socket error code to the failure class tests assert on. */
export function classifyError(code: string | undefined): ProbeFailure {
  switch (code) {
    case "ECONNREFUSED":
      return "refused";
    case "ETIMEDOUT":
      return "timeout";
    case "EHOSTUNREACH":
    case "ENETUNREACH":
    case "EHOSTDOWN":
      return "unreachable";
    case "ECONNRESET":
    case "EPIPE":
      return "reset";
    default:
      return "other";
  }
}

function probeTcp(req: ProbeRequest): Promise<ProbeResult> {
  const started = performance.now();
  // Hundredths of a ms: benchmarks take quantiles of sub-millisecond times.
  const elapsed = (): number => Math.round((performance.now() - started) * 100) / 100;
  return new Promise((resolve) => {
    let data = "";
    let settled = false;
    const socket = net.connect({
      host: req.host,
      port: req.port,
      ...(req.localAddress === undefined ? {} : { localAddress: req.localAddress }),
      ...(req.localPort === undefined ? {} : { localPort: req.localPort }),
    });
    const finish = (result: ProbeResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => {
      finish({
        ok: false,
        failure: "timeout",
        message: `no answer within ${timeout(req)} ms`,
        ms: elapsed(),
      });
    }, timeout(req));
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      data += chunk;
      const newline = data.indexOf("\n");
      if (newline >= 0) finish(withPeer(answered(data.slice(0, newline), elapsed())));
    });
    const withPeer = (r: ProbeResult): ProbeResult =>
      r.ok && socket.remoteAddress !== undefined ? { ...r, peer: socket.remoteAddress } : r;
    socket.on("end", () => {
      if (data !== "") finish(withPeer(answered(data, elapsed())));
      else finish({ ok: false, failure: "closed", message: "closed without an answer", ms: elapsed() });
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      finish({ ok: false, failure: classifyError(err.code), message: err.message, ms: elapsed() });
    });
  });
}

function probeUdp(req: ProbeRequest): Promise<ProbeResult> {
  const started = performance.now();
  // Hundredths of a ms: benchmarks take quantiles of sub-millisecond times.
  const elapsed = (): number => Math.round((performance.now() - started) * 100) / 100;
  return new Promise((resolve) => {
    let settled = false;
    const socket = dgram.createSocket(net.isIPv6(req.host) ? "udp6" : "udp4");
    const finish = (result: ProbeResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.close();
      resolve(result);
    };
    const timer = setTimeout(() => {
      finish({
        ok: false,
        failure: "timeout",
        message: `no answer within ${timeout(req)} ms`,
        ms: elapsed(),
      });
    }, timeout(req));
    socket.on("message", (msg, from) => {
      const r = answered(msg.toString("utf8").split("\n")[0] ?? "", elapsed());
      finish(r.ok ? { ...r, peer: from.address, peerPort: from.port } : r);
    });
    // A connected UDP socket receives ICMP errors (port unreachable → ECONNREFUSED) as socket
    // errors, which is what lets a UDP reject be told apart from a drop.
    socket.on("error", (err: NodeJS.ErrnoException) => {
      finish({ ok: false, failure: classifyError(err.code), message: err.message, ms: elapsed() });
    });
    const send = (): void => {
      if (req.unconnected !== true) {
        // connect() itself may fail (a socket balancer refuses, no route): its callback then
        // gets the error and the socket stays unconnected.
        socket.connect(req.port, req.host, (err?: NodeJS.ErrnoException) => {
          if (err)
            finish({ ok: false, failure: classifyError(err.code), message: err.message, ms: elapsed() });
          else socket.send("probe\n");
        });
        return;
      }
      socket.send("probe\n", req.port, req.host, (err) => {
        const code = (err as NodeJS.ErrnoException | null)?.code;
        if (err) finish({ ok: false, failure: classifyError(code), message: err.message, ms: elapsed() });
      });
    };
    if (req.localAddress !== undefined || req.localPort !== undefined) {
      socket.bind({ address: req.localAddress, port: req.localPort ?? 0 }, send);
    } else {
      send();
    }
  });
}

function answered(line: string, ms: number): ProbeResult {
  return { ok: true, answer: line, reply: parseEchoReply(line), ms };
}

function timeout(req: ProbeRequest): number {
  return req.timeoutMs ?? 1_000;
}

async function readStdin(): Promise<string> {
  let text = "";
  process.stdin.setEncoding("utf8");
  for await (const chunk of process.stdin) text += chunk as string;
  return text;
}

if (import.meta.main) {
  const batch = JSON.parse(await readStdin()) as ProbeBatch;
  if (batch.cgroup !== undefined) writeFileSync(join(batch.cgroup, "cgroup.procs"), String(process.pid));
  process.stdout.write(`${JSON.stringify(await probeAll(batch))}\n`);
}
