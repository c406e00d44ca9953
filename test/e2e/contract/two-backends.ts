// One kpng process with two backends, as the per-Service backend tests run it: the nft backend
// for the unlabelled Services and the iptables backend (iptables-nft) for those labelled
// service.kubernetes.io/service-proxy-name=legacy, both with the same flags.

import { fileURLToPath } from "node:url";
import type { Netns, Spawned } from "../../support/netns.ts";

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

/** `kpng file --input FILE to-local to-nft … to-iptables --service-proxy-name legacy …` in `node`. */
export function spawnTwoBackends(node: Netns, file: string, extraFlags: readonly string[] = []): Spawned {
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
      "to-iptables",
      "--iptables-mode",
      "nft",
      "--service-proxy-name",
      "legacy",
      ...sink,
    ],
    { name: "kpng", env: { KPNG_LOG_LEVEL: "debug" } },
  );
}
