// The network-namespace harness for end-to-end tests. The implementation lives in tools/netns/ (the
// demo builds the same topology, and src/ never imports from test/); this is the tests' entry.
//
//   const skip = await netnsSkipReason();
//   describe("nft backend", { skip }, () => {
//     const env = suiteTopology({ pods: [{ name: "web-1", echo: { tcpPorts: [8080] } }] });
//     test("…", async () => { const topo = env.topology; … });
//   });

import { existsSync } from "node:fs";
import { after, before, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { netnsUnavailableReason, removeLeftoverNamespaces } from "../../tools/netns/netns.ts";
import { Topology, type TopologyOptions } from "../../tools/netns/topology.ts";

export * from "../../tools/netns/addresses.ts";
export { type BpfMounts, mountBpf, pinForeignMap } from "../../tools/netns/bpf-mounts.ts";
export { CommandError, type CommandResult, type RunOptions, runCommand } from "../../tools/netns/exec.ts";
export {
  createVethPair,
  NAMESPACE_PREFIX,
  Netns,
  netnsUnavailableReason,
  ownNamespaces,
  removeLeftoverNamespaces,
  type VethEnd,
} from "../../tools/netns/netns.ts";
export { type ExitInfo, Spawned, type SpawnOptions } from "../../tools/netns/spawned.ts";
export {
  type EchoSpec,
  type Pod,
  type PodSpec,
  Topology,
  type TopologyOptions,
} from "../../tools/netns/topology.ts";

/**
 * The reason to skip a suite that needs network namespaces, or false to run it: pass it as
 * `describe(name, { skip }, fn)`. Also removes namespaces left behind by dead test processes.
 */
export async function netnsSkipReason(): Promise<string | false> {
  const reason = await netnsUnavailableReason();
  if (reason !== undefined) return reason;
  await removeLeftoverNamespaces();
  return false;
}

/** As netnsSkipReason, for suites that also load kpng's BPF programs (build/kpng.bpf.o). */
export async function ebpfSkipReason(): Promise<string | false> {
  const object = fileURLToPath(new URL("../../build/kpng.bpf.o", import.meta.url));
  return (
    (await netnsSkipReason()) || (existsSync(object) ? false : "build/kpng.bpf.o missing: npm run build:bpf")
  );
}

/**
 * Builds a Topology for a whole suite: call it in a `describe` body. The topology is created in a
 * `before` hook and destroyed in an `after` hook, which also runs when a test fails.
 *
 *   const env = suiteTopology({ pods: [{ name: "web-1", echo: { tcpPorts: [8080] } }] });
 *   test("…", async () => { env.topology.pod("web-1") … });
 */
export function suiteTopology(opts: TopologyOptions = {}): { readonly topology: Topology } {
  let topology: Topology | undefined;
  before(async () => {
    topology = await Topology.create(opts);
  });
  after(async () => {
    await topology?.destroy();
  });
  return {
    get topology(): Topology {
      if (topology === undefined) throw new Error("suiteTopology: the before hook has not built it (yet)");
      return topology;
    },
  };
}

/** Builds a Topology for one test, destroyed when the test ends (passed or failed). */
export async function testTopology(t: TestContext, opts: TopologyOptions = {}): Promise<Topology> {
  const topology = await Topology.create(opts);
  t.after(() => topology.destroy());
  return topology;
}
