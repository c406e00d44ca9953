// The image must contain every program kpng starts: each backend's list (its run and its
// cleanup), kube-proxy's cleanup and `kpng cleanup all` are checked against the packages
// deploy/Dockerfile installs, so that a new binary cannot ship without its package.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { localSinks } from "../../../src/cli/plugins.ts";
import { KUBE_PROXY_CLEANUP_BINARIES } from "../../../src/host/kube-proxy-leftovers/cleanup.ts";

const DOCKERFILE = readFileSync(join(import.meta.dirname, "..", "..", "..", "deploy", "Dockerfile"), "utf8");

/** The Debian (bookworm) package of each program kpng may start. */
const PACKAGE_OF: Readonly<Record<string, string>> = {
  nft: "nftables",
  ip: "iproute2",
  conntrack: "conntrack",
  ipset: "ipset",
  ipvsadm: "ipvsadm",
  bpftool: "bpftool",
  prlimit: "util-linux",
  nsenter: "util-linux",
  cat: "coreutils",
  ...Object.fromEntries(
    ["iptables", "ip6tables"].flatMap((base) =>
      ["nft", "legacy"].flatMap((variant) =>
        ["", "-save", "-restore"].map((tool) => [`${base}-${variant}${tool}`, "iptables"]),
      ),
    ),
  ),
};

/** The packages of every `apt-get install` in the Dockerfile (continuation lines joined). */
export function installedPackages(dockerfile: string): Set<string> {
  const joined = dockerfile.replace(/\\\n/g, " ");
  const out = new Set<string>();
  for (const m of joined.matchAll(/apt-get install ([^&\n]*)/g)) {
    for (const word of (m[1] ?? "").split(/\s+/)) if (word !== "" && !word.startsWith("-")) out.add(word);
  }
  return out;
}

function missing(binaries: readonly string[], installed: Set<string>): string[] {
  return binaries.filter((b) => {
    const pkg = PACKAGE_OF[b];
    return pkg === undefined || !installed.has(pkg);
  });
}

describe("deploy/Dockerfile contains every program kpng starts", () => {
  const installed = installedPackages(DOCKERFILE);

  it("reads the package list of the Dockerfile", () => {
    assert.ok(installed.has("nftables"), [...installed].join(" "));
    assert.deepEqual(
      installedPackages("RUN apt-get install -y --no-install-recommends \\\n  a b \\\n  c && rm x"),
      new Set(["a", "b", "c"]),
    );
  });

  for (const sink of localSinks) {
    it(`${sink.name}: run and cleanup`, () => {
      assert.deepEqual(missing(sink.binaries, installed), []);
    });
  }

  it("every kernel backend declares the programs it starts", () => {
    for (const sink of localSinks.filter((s) => s.cleanup !== undefined))
      assert.ok(sink.binaries.length > 0, `${sink.name} declares no binaries`);
  });

  it("kube-proxy's cleanup (iptables both variants, nft, IPVS)", () => {
    assert.deepEqual(missing(KUBE_PROXY_CLEANUP_BINARIES, installed), []);
  });

  it("a program without a package, or a package not installed, is reported", () => {
    assert.deepEqual(missing(["nft", "frobnicate"], installed), ["frobnicate"]);
    assert.deepEqual(missing(["ip"], installedPackages("RUN apt-get install -y nftables")), ["ip"]);
  });
});
