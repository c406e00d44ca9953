// A child process for netns.test.ts: builds a topology, prints its namespace names and then waits
// to be killed, never calling destroy(). The safety net must delete everything anyway.

import { Topology } from "../../../tools/netns/topology.ts";

const topology = await Topology.create({ pods: [{ name: "web", echo: { tcpPorts: [8080] } }] });
const names = [topology.node.name, topology.external.name, ...topology.pods.map((p) => p.ns.name)];
process.stdout.write(`namespaces ${JSON.stringify(names)}\n`);
if (process.argv[2] === "exit") process.exit(3);
setInterval(() => {}, 1_000);
