// The standard kube-like layout used by end-to-end tests and the demo:
//
//   external ──ext0── node ──vpN── pod N          (one namespace each)
//   192.0.2.2         192.0.2.1    198.51.100.N/32, 2001:db8:1::N/128
//   2001:db8::2       2001:db8::1  default route via the node (198.51.100.1, 2001:db8:1::1)
//
// The node namespace is where kpng runs; it forwards between the external client and the pods.
// Pods "on other nodes" are attached to the same node namespace: only their nodeName in the
// EndpointSlice differs. Service IPs (203.0.113.0/24, 2001:db8:2::/112) are not configured on any
// interface; the external client and the pods reach them through their default route. The node's
// own default route points at the external client (its "router"), which drops what it receives
// for addresses that are not its own, as a router that knows no Service IP would.

import { fileURLToPath } from "node:url";
import ipaddr from "ipaddr.js";
import * as A from "./addresses.ts";
import { createVethPair, Netns } from "./netns.ts";
import type { Spawned } from "./spawned.ts";

export interface EchoSpec {
  readonly tcpPorts?: readonly number[];
  readonly udpPorts?: readonly number[];
}

export interface PodSpec {
  /** Also the echo server's name, so answers say which pod replied. */
  readonly name: string;
  /** IPv4 and/or IPv6 addresses; by default one of each is allocated (198.51.100.N, 2001:db8:1::N). */
  readonly addresses?: readonly string[];
  /** Starts an echo server listening on these ports (all addresses, both families). */
  readonly echo?: EchoSpec;
}

export interface Pod {
  readonly name: string;
  readonly ns: Netns;
  readonly addresses: readonly string[];
  /** The first IPv4 / IPv6 address, if any. */
  readonly ipv4: string | undefined;
  readonly ipv6: string | undefined;
  /** The node-side veth name. */
  readonly hostInterface: string;
  readonly echo: Spawned | undefined;
}

export interface TopologyOptions {
  readonly pods?: readonly PodSpec[];
  /** The node's IPv4 address toward the external client, in 192.0.2.0/24; default 192.0.2.1. */
  readonly nodeIPv4?: string;
  /** The node's IPv6 address toward the external client, in 2001:db8::/64; default 2001:db8::1. */
  readonly nodeIPv6?: string;
}

const ECHO_SERVER_SCRIPT = fileURLToPath(new URL("./echo-server.ts", import.meta.url));

/** Sysctls set in every namespace before any interface exists. */
const NO_DAD = { "net.ipv6.conf.all.accept_dad": "0", "net.ipv6.conf.default.accept_dad": "0" };

export class Topology {
  /** The node running kpng. */
  readonly node: Netns;
  /** A client outside the cluster, on the node's link (192.0.2.2, 2001:db8::2). */
  readonly external: Netns;
  /** The node's addresses toward the external client: the node IPs for NodePorts. */
  readonly nodeIPv4: string;
  readonly nodeIPv6: string;
  readonly #pods = new Map<string, Pod>();
  /** Names and addresses of pods that exist or are being created. */
  readonly #reserved = new Map<string, readonly string[]>();
  #nextHost = 10;
  #nextInterface = 0;
  #destroyed = false;

  private constructor(node: Netns, external: Netns, nodeIPv4: string, nodeIPv6: string) {
    this.node = node;
    this.external = external;
    this.nodeIPv4 = nodeIPv4;
    this.nodeIPv6 = nodeIPv6;
  }

  /** Builds the node, the external client, the `client` pod and the given pods. */
  static async create(opts: TopologyOptions = {}): Promise<Topology> {
    const nodeIPv4 = opts.nodeIPv4 ?? A.NODE_IPV4;
    const nodeIPv6 = opts.nodeIPv6 ?? A.NODE_IPV6;
    checkNodeAddress(nodeIPv4, "192.0.2.0", 24, A.EXTERNAL_IPV4);
    checkNodeAddress(nodeIPv6, "2001:db8::", 64, A.EXTERNAL_IPV6);
    const [node, external] = await Promise.all([Netns.create(), Netns.create()]);
    const topology = new Topology(node, external, nodeIPv4, nodeIPv6);
    try {
      await topology.#connectNodeAndExternal();
      await Promise.all([
        topology.addPod({ name: A.CLIENT_POD.name, addresses: [A.CLIENT_POD.ipv4, A.CLIENT_POD.ipv6] }),
        ...(opts.pods ?? []).map((spec) => topology.addPod(spec)),
      ]);
    } catch (err) {
      await topology.destroy();
      throw err;
    }
    return topology;
  }

  /** The pod every topology has, for requests from inside the cluster. */
  get client(): Pod {
    return this.pod(A.CLIENT_POD.name);
  }

  get pods(): readonly Pod[] {
    return [...this.#pods.values()];
  }

  pod(name: string): Pod {
    const pod = this.#pods.get(name);
    if (pod === undefined) throw new Error(`no pod named ${name}`);
    return pod;
  }

  /** Creates a pod namespace wired to the node and, if asked, starts its echo server. */
  async addPod(spec: PodSpec): Promise<Pod> {
    if (this.#destroyed) throw new Error("topology destroyed");
    if (this.#reserved.has(spec.name)) throw new Error(`pod ${spec.name} already exists`);
    const addresses = spec.addresses ?? this.#allocateAddresses();
    checkPodAddresses(spec.name, addresses, this.#usedAddresses(), [this.nodeIPv4, this.nodeIPv6]);
    const hostInterface = `vp${this.#nextInterface++}`;
    // Reserve the name and addresses before the first await, so parallel addPod calls conflict.
    this.#reserved.set(spec.name, addresses);
    let ns: Netns | undefined;
    try {
      ns = await Netns.create();
      await ns.sysctl(NO_DAD);
      await createVethPair({ ns: this.node, name: hostInterface }, { ns, name: "eth0" });
      await ns.ipBatch(podSideCommands(addresses));
      await this.node.ipBatch(nodeSideCommands(hostInterface, addresses));
      const echo = spec.echo === undefined ? undefined : await startEcho(ns, spec.name, spec.echo);
      if (this.#destroyed) throw new Error("topology destroyed while the pod was being created");
      const pod: Pod = {
        name: spec.name,
        ns,
        addresses,
        ipv4: addresses.find((a) => !a.includes(":")),
        ipv6: addresses.find((a) => a.includes(":")),
        hostInterface,
        echo,
      };
      this.#pods.set(spec.name, pod);
      return pod;
    } catch (err) {
      this.#reserved.delete(spec.name);
      await ns?.destroy();
      throw err;
    }
  }

  /** Deletes a pod's namespace (its veth goes with it) and the node's routes to it. */
  async removePod(name: string): Promise<void> {
    const pod = this.pod(name);
    this.#pods.delete(name);
    this.#reserved.delete(name);
    await pod.ns.destroy();
  }

  /** Stops every process and deletes every namespace. Safe to call twice. */
  async destroy(): Promise<void> {
    this.#destroyed = true;
    const pods = [...this.#pods.values()];
    this.#pods.clear();
    this.#reserved.clear();
    await Promise.all([...pods.map((p) => p.ns.destroy()), this.node.destroy(), this.external.destroy()]);
  }

  async #connectNodeAndExternal(): Promise<void> {
    await Promise.all([
      this.node.sysctl({
        ...NO_DAD,
        "net.ipv4.ip_forward": "1",
        "net.ipv6.conf.all.forwarding": "1",
      }),
      // The external client is the node's router, and like a real one it does not know Service
      // IPs: with forwarding off it silently drops what the node sends it that is not its own.
      this.external.sysctl({ ...NO_DAD, "net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "0" }),
    ]);
    await createVethPair({ ns: this.node, name: "ext0" }, { ns: this.external, name: "eth0" });
    await this.node.ipBatch([
      ["address", "add", `${this.nodeIPv4}/${A.EXTERNAL_PREFIX_V4}`, "dev", "ext0"],
      ["address", "add", `${this.nodeIPv6}/${A.EXTERNAL_PREFIX_V6}`, "dev", "ext0", "nodad"],
      // A node has a default route. Without one, a packet to a Service IP that no rule catches
      // would fail routing before the forward hook (ICMP unreachable instead of kpng's drop).
      ["route", "add", "0.0.0.0/0", "via", A.EXTERNAL_IPV4, "dev", "ext0"],
      ["route", "add", "::/0", "via", A.EXTERNAL_IPV6, "dev", "ext0"],
    ]);
    await this.external.ipBatch([
      ["address", "add", `${A.EXTERNAL_IPV4}/${A.EXTERNAL_PREFIX_V4}`, "dev", "eth0"],
      ["address", "add", `${A.EXTERNAL_IPV6}/${A.EXTERNAL_PREFIX_V6}`, "dev", "eth0", "nodad"],
      ["route", "add", "0.0.0.0/0", "via", this.nodeIPv4, "dev", "eth0"],
      ["route", "add", "::/0", "via", this.nodeIPv6, "dev", "eth0"],
    ]);
  }

  #allocateAddresses(): string[] {
    const used = this.#usedAddresses();
    for (;;) {
      const host = this.#nextHost++;
      if (host > 254) throw new Error("pod address range exhausted");
      const pair = [`198.51.100.${host}`, `2001:db8:1::${host}`];
      if (!pair.some((a) => used.has(a))) return pair;
    }
  }

  #usedAddresses(): Set<string> {
    return new Set([...this.#reserved.values()].flat());
  }
}

function checkNodeAddress(ip: string, net: string, bits: number, external: string): void {
  if (!ipaddr.isValid(ip) || ip === external || !ipaddr.parse(ip).match(ipaddr.parse(net), bits)) {
    throw new Error(
      `node address ${ip} must be in ${net}/${bits} and differ from the external client ${external}`,
    );
  }
}

function checkPodAddresses(
  name: string,
  addresses: readonly string[],
  used: ReadonlySet<string>,
  nodeAddresses: readonly string[],
): void {
  if (addresses.length === 0) throw new Error(`pod ${name}: no address`);
  for (const address of addresses) {
    if (!A.isDocumentationAddress(address)) {
      throw new Error(`pod ${name}: ${address} is not in a documentation range (TEST-NET, 2001:db8::/32)`);
    }
    const reserved = [...nodeAddresses, A.EXTERNAL_IPV4, A.EXTERNAL_IPV6, A.POD_GATEWAY_V4, A.POD_GATEWAY_V6];
    if (reserved.includes(address)) {
      throw new Error(`pod ${name}: ${address} is reserved by the topology`);
    }
    if (used.has(address)) throw new Error(`pod ${name}: ${address} is already used`);
  }
}

/** Host routes to the node's gateway address, then a default route through it. */
function podSideCommands(addresses: readonly string[]): string[][] {
  const commands: string[][] = [];
  const v4 = addresses.filter((a) => !a.includes(":"));
  const v6 = addresses.filter((a) => a.includes(":"));
  for (const a of v4) commands.push(["address", "add", `${a}/32`, "dev", "eth0"]);
  for (const a of v6) commands.push(["address", "add", `${a}/128`, "dev", "eth0", "nodad"]);
  if (v4.length > 0) {
    commands.push(["route", "add", `${A.POD_GATEWAY_V4}/32`, "dev", "eth0"]);
    commands.push(["route", "add", "0.0.0.0/0", "via", A.POD_GATEWAY_V4, "dev", "eth0"]);
  }
  if (v6.length > 0) {
    commands.push(["route", "add", `${A.POD_GATEWAY_V6}/128`, "dev", "eth0"]);
    commands.push(["route", "add", "::/0", "via", A.POD_GATEWAY_V6, "dev", "eth0"]);
  }
  return commands;
}

/** The gateway addresses on the node's end of the veth, and one host route per pod address. */
function nodeSideCommands(hostInterface: string, addresses: readonly string[]): string[][] {
  const commands: string[][] = [
    ["address", "add", `${A.POD_GATEWAY_V4}/32`, "dev", hostInterface],
    ["address", "add", `${A.POD_GATEWAY_V6}/128`, "dev", hostInterface, "nodad"],
  ];
  for (const a of addresses) {
    commands.push(["route", "add", a.includes(":") ? `${a}/128` : `${a}/32`, "dev", hostInterface]);
  }
  return commands;
}

async function startEcho(ns: Netns, name: string, spec: EchoSpec): Promise<Spawned> {
  const argv = [process.execPath, ECHO_SERVER_SCRIPT, "--name", name];
  for (const port of spec.tcpPorts ?? []) argv.push("--port", String(port));
  for (const port of spec.udpPorts ?? []) argv.push("--udp-port", String(port));
  const echo = ns.spawn(argv, { name: `echo ${name}` });
  await echo.waitForLine(/^listening /, 15_000);
  return echo;
}
