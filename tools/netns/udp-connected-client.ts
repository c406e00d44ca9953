// A UDP client as glibc's resolver is one: a connected socket (connect() then send()) that keeps
// sending, one datagram per interval, and prints one JSON line per event: {"connected":true},
// {"reply":"<echo server name>"}, {"error":"<code>"}. After an error it closes the socket and
// connects a new one, as a resolver retrying does.
//   node tools/netns/udp-connected-client.ts --host 203.0.113.18 --port 53 [--cgroup DIR] [--interval-ms 200]

import dgram from "node:dgram";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { parseEchoReply } from "./echo-reply.ts";

const { values } = parseArgs({
  options: {
    host: { type: "string" },
    port: { type: "string" },
    cgroup: { type: "string" },
    "interval-ms": { type: "string", default: "200" },
  },
});
const host = values.host ?? "";
const port = Number(values.port);
if (host === "" || !Number.isInteger(port)) {
  process.stderr.write("usage: udp-connected-client.ts --host ADDRESS --port PORT [--cgroup DIR]\n");
  process.exit(2);
}
// Joined before the first socket: the cgroup's programs then translate its connect().
if (values.cgroup !== undefined) writeFileSync(join(values.cgroup, "cgroup.procs"), String(process.pid));

const print = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

let socket: dgram.Socket | undefined;
let connected = false;

function open(): void {
  const s = dgram.createSocket(host.includes(":") ? "udp6" : "udp4");
  socket = s;
  connected = false;
  s.on("message", (msg) => print({ reply: parseEchoReply(msg.toString())?.name ?? msg.toString() }));
  s.on("error", (err: NodeJS.ErrnoException) => failed(s, err));
  s.connect(port, host, () => {
    connected = true;
    print({ connected: true });
  });
}

function failed(s: dgram.Socket, err: NodeJS.ErrnoException): void {
  if (s !== socket) return;
  print({ error: err.code ?? err.message });
  try {
    s.close();
  } catch {
    // already closed
  }
  open();
}

open();
setInterval(() => {
  const s = socket;
  if (s === undefined || !connected) return;
  s.send("?", (err) => {
    if (err) failed(s, err as NodeJS.ErrnoException);
  });
}, Number(values["interval-ms"]));
