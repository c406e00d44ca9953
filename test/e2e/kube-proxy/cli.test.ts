// `kpng kube-proxy` refuses bad input before anything starts: one clear error, exit 2.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const HEADER = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";

function kpng(...args: string[]): { code: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [MAIN, ...args], {
    encoding: "utf8",
    timeout: 20_000,
    env: { ...process.env, KPNG_LOG_LEVEL: "warn" },
  });
  return { code: r.status, stderr: r.stderr };
}

describe("kpng kube-proxy: bad input", () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-kube-proxy-cli-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  const cases: [string, () => string[], RegExp][] = [
    [
      "an unreadable file",
      () => [`--config=${join(dir, "missing.conf")}`],
      /--config: cannot read .*missing\.conf/,
    ],
    [
      "the wrong kind",
      () => [`--config=${file("kind.yaml", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: Pod\n")}`],
      /kind is "Pod"; expected KubeProxyConfiguration/,
    ],
    [
      "the wrong apiVersion",
      () => [`--config=${file("version.yaml", "apiVersion: v1\nkind: KubeProxyConfiguration\n")}`],
      /apiVersion is "v1"; expected kubeproxy\.config\.k8s\.io\/v1alpha1/,
    ],
    [
      "a field of the wrong type",
      () => [`--config=${file("type.yaml", `${HEADER}mode: nftables\nclusterCIDR: [10.0.0.0/8]\n`)}`],
      /field clusterCIDR: expected a string/,
    ],
    [
      "mode ipvs",
      () => [`--config=${file("ipvs.yaml", `${HEADER}mode: ipvs\n`)}`],
      /mode: ipvs: .*use mode: nftables/,
    ],
    ["an unknown flag", () => ["--proxy-mod=nftables"], /unknown flag --proxy-mod/],
  ];
  for (const [name, args, pattern] of cases) {
    it(`${name}: exit 2 with a message naming it`, () => {
      const r = kpng("kube-proxy", ...args());
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, pattern);
      assert.equal(r.stderr.trim().split("\n").length, 1, `one line: ${r.stderr}`);
    });
  }

  it("cleanup kube-proxy takes no arguments", () => {
    const r = kpng("cleanup", "kube-proxy", "--now");
    assert.equal(r.code, 2);
    assert.match(r.stderr, /cleanup kube-proxy takes no arguments/);
  });

  it("an unknown field warns, naming it, before the mode is refused", () => {
    const r = kpng("kube-proxy", `--config=${file("unknown.yaml", `${HEADER}mode: ipvs\nfancy: 1\n`)}`);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown field fancy/);
  });
});

describe("kpng kube-proxy: housekeeping flags", () => {
  it("--version prints the version and exits 0", () => {
    const r = spawnSync(process.execPath, [MAIN, "kube-proxy", "--version"], {
      encoding: "utf8",
      timeout: 20_000,
    });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^kpng \d+\.\d+\.\d+/);
  });

  it("--write-config-to writes the effective configuration and exits 0", () => {
    const dir = mkdtempSync(join(tmpdir(), "kpng-write-config-"));
    try {
      writeFileSync(join(dir, "in.yaml"), `${HEADER}mode: nftables\nbindAddress: "::"\n`);
      const r = kpng(
        "kube-proxy",
        `--config=${join(dir, "in.yaml")}`,
        `--write-config-to=${join(dir, "out.yaml")}`,
      );
      assert.equal(r.code, 0, r.stderr);
      const out = readFileSync(join(dir, "out.yaml"), "utf8");
      assert.match(out, /^metricsBindAddress: "?\[::1\]:10249"?$/m, out);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("cleanup all takes no arguments", () => {
    const r = kpng("cleanup", "all", "--now");
    assert.equal(r.code, 2);
    assert.match(r.stderr, /cleanup all takes no arguments/);
  });
});
