// Which IPVS virtual servers are kube-proxy's, from `ipvsadm -S -n` output. Pure.
// kube-proxy's ipvs mode puts every Service IP (ClusterIP, externalIP, LB IP) on the dummy
// interface kube-ipvs0, and adds NodePort virtual servers on the node's own addresses. So a
// virtual server is kube-proxy's when its address is on kube-ipvs0, or when it listens in the
// NodePort range on an address of the node; any other virtual server is left alone.

interface VirtualServer {
  /** "-t", "-u" or "--sctp-service" as ipvsadm writes it. */
  readonly protocolFlag: string;
  /** "10.96.0.1:443" or "[2001:db8::1]:443" as ipvsadm writes it. */
  readonly service: string;
  readonly address: string;
  readonly port: number;
}

const NODE_PORT_RANGE = { first: 30000, last: 32767 } as const;

export function parseIpvsSave(text: string): VirtualServer[] {
  const servers: VirtualServer[] = [];
  for (const line of text.split("\n")) {
    const m = /^-A\s+(-t|-u|--sctp-service)\s+(\S+)/.exec(line.trim());
    if (m === null) continue;
    const service = m[2] ?? "";
    const hp = /^\[?([^\]]+?)\]?:(\d+)$/.exec(service);
    if (hp === null) continue;
    servers.push({ protocolFlag: m[1] ?? "", service, address: hp[1] ?? "", port: Number(hp[2]) });
  }
  return servers;
}

export function kubeProxyVirtualServers(
  servers: readonly VirtualServer[],
  dummyAddresses: ReadonlySet<string>,
  nodeAddresses: ReadonlySet<string>,
  nodePorts: { readonly first: number; readonly last: number } = NODE_PORT_RANGE,
): VirtualServer[] {
  return servers.filter(
    (s) =>
      dummyAddresses.has(s.address) ||
      (nodeAddresses.has(s.address) && s.port >= nodePorts.first && s.port <= nodePorts.last),
  );
}

/** The addresses in `ip -o addr show` output, without prefixes. */
export function addressesOf(ipAddrOutput: string): Set<string> {
  const found = new Set<string>();
  for (const m of ipAddrOutput.matchAll(/\sinet6?\s+([0-9a-fA-F.:]+)\//g)) found.add(m[1] ?? "");
  return found;
}
