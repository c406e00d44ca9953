// One kpng process with two backends, as the per-Service backend tests run it: the nft backend
// for the unlabelled Services and another backend (iptables-nft, or eBPF) for those labelled
// service.kubernetes.io/service-proxy-name=legacy, both with the same flags.

import { fileURLToPath } from "node:url";
import { listFrontends } from "../../../src/backends/ebpf/list.ts";
import { PinnedMaps } from "../../../src/backends/ebpf/maps.ts";
import { ebpfSkipReason, type Netns, netnsSkipReason, type Spawned } from "../../support/netns.ts";
import { suiteEbpfSetup } from "./backends.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));

/** The flags both sinks get: node-1, the contract suite's node-port and pod ranges, fast syncs. */
export const SINK_FLAGS = [
  "--node-name",
  "node-1",
  "--nodeport-addresses",
  "192.0.2.1/32",
  "--cluster-cidr",
  "198.51.100.0/24",
  "--min-sync-period",
  "100ms",
] as const;

/** The backend of the Services labelled legacy, beside to-nft for the unlabelled ones. */
export interface LabelledBackend {
  readonly name: string;
  /** kube-proxy's name of its mode: the `backend` label of its sync metrics. */
  readonly mode: string;
  /** The `backend` labels of the loops it runs beside its own (to-ebpf's nft rules). */
  readonly companions: readonly string[];
  /** Its sink and the sink's own flags (without --service-proxy-name). */
  sink(): readonly string[];
  /** The cgroup that clients join so that its programs balance their sockets (to-ebpf). */
  cgroup(): string | undefined;
  /** Whether its kernel state holds the address (read fast enough to sample a handover). */
  holds(node: Netns, ip: string): Promise<boolean>;
  /** The lines of its kernel state that name Service addresses, as its own tool prints them. */
  listing(node: Netns): Promise<string[]>;
}

const IPTABLES: LabelledBackend = {
  name: "iptables",
  mode: "iptables",
  companions: [],
  sink: () => ["to-iptables", "--iptables-mode", "nft"],
  cgroup: () => undefined,
  async holds(node, ip) {
    return (await this.listing(node)).some((l) => l.includes(ip));
  },
  async listing(node) {
    const nat = (await node.exec(["iptables-nft-save", "-t", "nat"])).stdout;
    return nat.split("\n").filter((l) => l.startsWith("-A KPNG"));
  },
};

/**
 * to-ebpf with its bpffs and cgroup (made in the calling `describe`'s hooks). Its nft rules for
 * traffic from other machines get their own table: `kpng` is to-nft's.
 */
function ebpfLabelled(): LabelledBackend {
  const mounts = suiteEbpfSetup();
  const setup = () => {
    if (mounts.setup === undefined) throw new Error("ebpf: the suite's before hook has not run");
    return mounts.setup;
  };
  return {
    name: "ebpf",
    mode: "ebpf",
    companions: ["ebpf-nftables"],
    sink: () => ["to-ebpf", "--table-name", "kpng_ebpf", ...setup().flags],
    cgroup: () => setup().clientCgroup,
    // The frontend map, read as `kpng ebpf list` reads it (which takes a process start).
    async holds(_node, ip) {
      let maps: PinnedMaps;
      try {
        maps = new PinnedMaps(setup().bpfRoot ?? "");
      } catch {
        return false;
      }
      try {
        return listFrontends(maps).some((f) => f.address === ip);
      } finally {
        maps.close();
      }
    },
    async listing(node) {
      const out = await node.exec([
        process.execPath,
        MAIN,
        "ebpf",
        "list",
        "--bpf-root",
        setup().bpfRoot ?? "",
      ]);
      return out.stdout.split("\n").filter(Boolean);
    },
  };
}

/** The backends run beside to-nft: each made in the suite's describe body, with why it cannot run here. */
export const LABELLED: readonly {
  readonly name: string;
  readonly make: () => LabelledBackend;
  readonly skip: string | false;
}[] = [
  { name: "iptables", make: () => IPTABLES, skip: await netnsSkipReason() },
  { name: "ebpf", make: ebpfLabelled, skip: await ebpfSkipReason() },
];

/** `kpng file --input FILE to-local to-nft … <labelled sink> --service-proxy-name legacy …` in `node`. */
export function spawnTwoBackends(
  node: Netns,
  file: string,
  extraFlags: readonly string[] = [],
  labelled: LabelledBackend = IPTABLES,
): Spawned {
  const sink = [...SINK_FLAGS, ...extraFlags];
  return node.spawn(
    [
      process.execPath,
      MAIN,
      "file",
      "--input",
      file,
      "to-local",
      "to-nft",
      ...sink,
      ...labelled.sink(),
      "--service-proxy-name",
      "legacy",
      ...sink,
    ],
    { name: "kpng", env: { KPNG_LOG_LEVEL: "debug" } },
  );
}
