// The backends the contract suite runs against: one entry per backend. Each says how to start it
// after `to-local`, what `kpng cleanup` calls it, and how to look at its kernel state for the few
// cases that must (adoption after a restart, cleanup).

import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before } from "node:test";
import { type BpfMounts, mountBpf, type Netns, pinForeignMap } from "../../support/netns.ts";

/** What a backend needs beside its sink flags, made before the suite and removed after it. */
export interface BackendSetup {
  /** More sink flags (and the same for `kpng cleanup`). */
  readonly flags: readonly string[];
  /** A cgroup that node-local clients and pods join (the eBPF backend balances its sockets). */
  readonly clientCgroup?: string;
  /** The bpffs directory kpng pins under (to-ebpf). */
  readonly bpfRoot?: string;
  teardown(): Promise<void>;
}

export interface BackendUnderTest {
  readonly name: string;
  /** kube-proxy's name of its mode: what /proxyMode answers, the `backend` label of the sync metrics. */
  readonly mode: string;
  /** The sink and its flags, after `to-local`. */
  readonly sink: readonly string[];
  /** `kpng cleanup <cleanup>`. */
  readonly cleanup: string;
  /** Kernel-side identity of kpng's entry rules: unchanged when a restarted kpng adopts them. */
  adoptionMarker(node: Netns): Promise<string>;
  /** Creates another program's rules, which cleanup must leave alone. */
  addForeign(node: Netns): Promise<void>;
  /** Whether kpng's and the foreign rules are present. */
  inspect(node: Netns): Promise<{ readonly kpng: boolean; readonly foreign: boolean }>;
  /** Flushes kpng's rules the way another program might; only for backends that detect it. */
  flush?(node: Netns): Promise<void>;
  /** An endpoint reaching itself through a Service sees its own address (no masquerade). */
  readonly hairpinKeepsClientAddress?: boolean;
  /** Runs before the suite starts kpng. */
  setup?(): Promise<BackendSetup>;
}

const nft: BackendUnderTest = {
  name: "nft",
  mode: "nftables",
  sink: ["to-nft"],
  cleanup: "nft",
  async adoptionMarker(node) {
    const listing = (await node.exec(["nft", "-a", "list", "chain", "ip", "kpng", "services"])).stdout;
    return /handle (\d+)/.exec(listing)?.[1] ?? "";
  },
  async addForeign(node) {
    await node.exec(["nft", "add", "table", "ip", "someone-else"]);
  },
  async inspect(node) {
    const tables = (await node.exec(["nft", "list", "tables"])).stdout;
    return { kpng: /kpng/.test(tables), foreign: /table ip someone-else/.test(tables) };
  },
  // Repaired through the probe of the shared sync loop.
  async flush(node) {
    await node.exec(["nft", "flush", "ruleset"]);
  },
};

function iptables(variant: "nft" | "legacy"): BackendUnderTest {
  const save = async (node: Netns) =>
    (await node.exec([`iptables-${variant}-save`])).stdout +
    (await node.exec([`ip6tables-${variant}-save`])).stdout;
  return {
    name: `iptables-${variant}`,
    mode: "iptables",
    sink: ["to-iptables", "--iptables-mode", variant],
    cleanup: "iptables",
    async adoptionMarker(node) {
      const jumps = (await save(node)).split("\n").filter((l) => /^-A [A-Z]+ .*-j KPNG-/.test(l));
      if (variant === "legacy") return jumps.join("\n");
      // iptables-nft rules are nft rules: a re-created jump would get a new handle.
      const chain = (await node.exec(["nft", "-a", "list", "chain", "ip", "nat", "PREROUTING"])).stdout;
      return `${jumps.join("\n")}\n${/KPNG-SERVICES.*handle (\d+)/.exec(chain)?.[1] ?? ""}`;
    },
    async addForeign(node) {
      await node.exec([`iptables-${variant}`, "-t", "nat", "-N", "SOMEONE-ELSE"]);
      await node.exec([`iptables-${variant}`, "-t", "nat", "-A", "PREROUTING", "-j", "SOMEONE-ELSE"]);
    },
    async flush(node) {
      for (const table of ["nat", "filter"]) {
        await node.exec([`iptables-${variant}`, "-t", table, "-F"]);
        await node.exec([`iptables-${variant}`, "-t", table, "-X"]);
      }
    },
    async inspect(node) {
      const text = await save(node);
      return { kpng: /KPNG-/.test(text), foreign: /-A PREROUTING -j SOMEONE-ELSE/.test(text) };
    },
  };
}

/**
 * Socket-level balancing in BPF for node-local clients and pods (which join the test's cgroup),
 * with the nft rules of the same process for traffic from other machines.
 */
function ebpf(): BackendUnderTest {
  let mounts: BpfMounts | undefined;
  const m = () => {
    if (mounts === undefined) throw new Error("ebpf: setup() has not run");
    return mounts;
  };
  const attached = async (node: Netns) => {
    const out = (await node.exec(["bpftool", "-j", "cgroup", "show", m().clients])).stdout.trim();
    return (out === "" ? [] : JSON.parse(out)) as { id: number; name: string }[];
  };
  return {
    name: "ebpf",
    mode: "ebpf",
    sink: ["to-ebpf"],
    cleanup: "ebpf",
    hairpinKeepsClientAddress: true,
    async setup() {
      mounts = await mountBpf();
      return {
        flags: ["--bpf-root", mounts.bpfRoot, "--cgroup-root", mounts.clients],
        clientCgroup: mounts.clients,
        bpfRoot: mounts.bpfRoot,
        teardown: () => m().destroy(),
      };
    },
    // The programs stay attached across a restart: same program ids, same nft entry rule.
    async adoptionMarker(node) {
      const ids = (await attached(node)).map((a) => `${a.name}=${a.id}`);
      return ids.length === 0 ? "" : `${ids.join(",")} ${await nft.adoptionMarker(node)}`;
    },
    async addForeign(node) {
      const foreign = join(m().bpfRoot, "someone-else");
      await pinForeignMap(node, foreign);
      await nft.addForeign(node);
    },
    async inspect(node) {
      const tables = await nft.inspect(node);
      const programs = (await attached(node)).some((a) => a.name.startsWith("kpng_"));
      return {
        kpng: tables.kpng || programs || existsSync(join(m().bpfRoot, "kpng")),
        foreign: tables.foreign && existsSync(join(m().bpfRoot, "someone-else")),
      };
    },
    // Detaches the programs, removes every pin and flushes the nft rules.
    async flush(node) {
      for (const a of await attached(node)) {
        const hook = a.name.replace(/^kpng_/, "");
        await node.exec(["bpftool", "cgroup", "detach", m().clients, hook, "id", String(a.id)]);
      }
      rmSync(join(m().bpfRoot, "kpng"), { recursive: true, force: true });
      await nft.flush?.(node);
    },
  };
}

/** Adding a backend to the contract suite is one line here. */
export const BACKENDS: readonly BackendUnderTest[] = [nft, iptables("nft"), iptables("legacy"), ebpf()];

/**
 * The eBPF backend's mounts for a `describe` of a suite that lists its backends itself: made in a
 * `before` hook, removed in an `after` hook. `setup` holds the sink flags and the client cgroup.
 */
export function suiteEbpfSetup(): { readonly setup: BackendSetup | undefined } {
  const backend = ebpf();
  let setup: BackendSetup | undefined;
  before(async () => {
    setup = await backend.setup?.();
  });
  after(async () => {
    await setup?.teardown();
  });
  return {
    get setup() {
      return setup;
    },
  };
}
