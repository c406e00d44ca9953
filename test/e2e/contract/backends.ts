// The backends the contract suite runs against: one entry per backend. Each says how to start it
// after `to-local`, what `kpng cleanup` calls it, and how to look at its kernel state for the few
// cases that must (adoption after a restart, cleanup).

import type { Netns } from "../../support/netns.ts";

export interface BackendUnderTest {
  readonly name: string;
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
}

const nft: BackendUnderTest = {
  name: "nft",
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

/** Adding a backend to the contract suite is one line here. */
export const BACKENDS: readonly BackendUnderTest[] = [nft, iptables("nft"), iptables("legacy")];
