// KubeProxyConfiguration + kube-proxy flags → kpng: table tests over real configuration files.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { toKpngArgv } from "../../../src/kube-proxy-compat/argv.ts";
import { readKubeProxyConfig } from "../../../src/kube-proxy-compat/config-file.ts";
import { parseKubeProxyFlags } from "../../../src/kube-proxy-compat/flags.ts";
import { type Translation, translate } from "../../../src/kube-proxy-compat/translate.ts";
import { UsageError } from "../../../src/plugin/usage-error.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
/** The exact config.conf kubeadm writes into the kube-proxy ConfigMap (mode "" = iptables). */
const KUBEADM = readFileSync(join(FIXTURES, "kubeadm-config.conf"), "utf8");
const KUBEADM_NFT = KUBEADM.replace(/^mode: ""$/m, "mode: nftables");

function run(text: string, args: string[] = []): Translation & { fileWarnings: readonly string[] } {
  const { values, warnings } = readKubeProxyConfig(text, "config.conf");
  return { ...translate(values, parseKubeProxyFlags(args)), fileWarnings: warnings };
}

/** The sink options as "flag=value" (true flags bare), in order. */
function sinkFlags(t: Translation): string[] {
  return t.sink.options.map((o) => (o.value === true ? o.flag : `${o.flag}=${o.value}`));
}

function usageError(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => err instanceof UsageError && pattern.test(err.message));
}

describe("kube-proxy configuration → kpng", () => {
  it("kubeadm's file in nftables mode: kube-proxy's defaults, the kubeconfig, the cluster CIDR", () => {
    const t = run(KUBEADM_NFT);
    assert.equal(t.mode, "nftables");
    assert.equal(t.sink.name, "to-nft");
    assert.deepEqual(t.source.options, [
      {
        flag: "--kubeconfig",
        value: "/var/lib/kube-proxy/kubeconfig.conf",
        from: "clientConnection.kubeconfig",
        defaulted: false,
      },
    ]);
    assert.deepEqual(sinkFlags(t), [
      "--healthz-bind-address=0.0.0.0:10256",
      "--metrics-bind-address=127.0.0.1:10249",
      "--cluster-cidr=10.244.0.0/16",
      "--nodeport-addresses=primary",
      "--sync-period=30s",
      "--min-sync-period=1s",
      "--cleanup-kube-proxy",
      "--conntrack-max-per-core=32768",
      "--conntrack-min=131072",
      "--conntrack-tcp-timeout-established=24h0m0s",
      "--conntrack-tcp-timeout-close-wait=1h0m0s",
    ]);
    assert.equal(t.oomScoreAdj, -999);
    assert.equal(t.logLevel, "info");
    // Every field kubeadm writes is known, and its zero values raise no warning.
    assert.deepEqual(t.fileWarnings, []);
    assert.deepEqual(t.warnings, []);
  });

  it('the exact kubeadm file (mode "", i.e. iptables) runs the iptables backend', () => {
    const t = run(KUBEADM);
    assert.equal(t.sink.name, "to-iptables");
    assert.ok(sinkFlags(t).includes("--cleanup-kube-proxy"));
    assert.deepEqual(t.warnings, []);
  });

  it("a file with only kind, apiVersion and mode gets kube-proxy's defaults, as kubeadm's does", () => {
    const minimal = run(readFileSync(join(FIXTURES, "kube-proxy-defaults.json"), "utf8"));
    const kubeadm = run(KUBEADM_NFT);
    assert.deepEqual(
      sinkFlags(minimal),
      sinkFlags(kubeadm).filter((f) => !f.startsWith("--cluster-cidr")),
    );
    assert.deepEqual(minimal.source.options, []);
    assert.match(minimal.warnings.join("\n"), /clusterCIDR is empty/);
  });

  it("a file with every kube-proxy default written out gives what kubeadm's zeros give, without warnings", () => {
    const defaulted = run(readFileSync(join(FIXTURES, "kube-proxy-defaulted.yaml"), "utf8"));
    const kubeadm = run(KUBEADM_NFT);
    assert.deepEqual(sinkFlags(defaulted), sinkFlags(kubeadm));
    assert.deepEqual(defaulted.source.options, kubeadm.source.options);
    assert.equal(defaulted.oomScoreAdj, kubeadm.oomScoreAdj);
    assert.deepEqual([...defaulted.fileWarnings, ...defaulted.warnings], []);
  });

  it("flags override the file, as in kube-proxy", () => {
    const t = run(KUBEADM_NFT, [
      "--hostname-override=Node-1",
      "--cluster-cidr",
      "10.0.0.0/8,fd00::/48",
      "--nodeport-addresses=192.0.2.0/24",
      "--masquerade-all",
      "--kubeconfig=/other",
      "--master=https://192.0.2.10:6443",
      "--healthz-bind-address=127.0.0.1:10256",
      "--conntrack-max-per-core=0",
      "--v=4",
    ]);
    const flags = sinkFlags(t);
    assert.ok(flags.includes("--node-name=node-1"), "lower-cased, as kube-proxy does");
    assert.ok(flags.includes("--cluster-cidr=10.0.0.0/8,fd00::/48"));
    assert.ok(flags.includes("--nodeport-addresses=192.0.2.0/24"));
    assert.ok(flags.includes("--masquerade-all"));
    assert.ok(flags.includes("--healthz-bind-address=127.0.0.1:10256"));
    assert.ok(flags.includes("--conntrack-max-per-core=32768"), "0 is kube-proxy's 'unset'");
    assert.deepEqual(
      t.source.options.map((o) => `${o.flag}=${o.value}`),
      ["--kubeconfig=/other", "--master=https://192.0.2.10:6443"],
    );
    assert.equal(t.logLevel, "debug");
  });

  it("the active mode's section wins over the top-level sync periods; the other section warns", () => {
    const text = `${KUBEADM_NFT}syncPeriod: 1m\nminSyncPeriod: 2s\n`
      .replace("nftables:\n  masqueradeAll: false", "nftables:\n  masqueradeAll: true")
      .replace(/nftables:\n(( {2}.*\n)*?) {2}syncPeriod: 0s/, "nftables:\n$1  syncPeriod: 45s")
      .replace("  localhostNodePorts: null", "  localhostNodePorts: false");
    const t = run(text);
    const flags = sinkFlags(t);
    assert.ok(flags.includes("--sync-period=45s"), flags.join(" "));
    assert.ok(flags.includes("--min-sync-period=2s"));
    assert.ok(flags.includes("--masquerade-all"));
    assert.deepEqual(t.warnings, []);
    const other = run(
      KUBEADM_NFT.replace(
        "  masqueradeAll: false\n  masqueradeBit: null\n  minSyncPeriod: 0s\n  syncPeriod: 0s\nipvs",
        "  masqueradeAll: true\n  masqueradeBit: null\n  minSyncPeriod: 0s\n  syncPeriod: 0s\nipvs",
      ),
    );
    assert.match(
      other.warnings.join("\n"),
      /iptables\.masqueradeAll: applies to another proxy mode than nftables/,
    );
  });

  it("iptables mode: its own section; what the backend cannot honour is refused", () => {
    const text = KUBEADM.replace(/^mode: ""$/m, "mode: iptables");
    const t = translate(readKubeProxyConfig(text, "config.conf").values, parseKubeProxyFlags([]));
    assert.equal(t.sink.name, "to-iptables");
    assert.ok(
      !sinkFlags(t).some((f) => f.startsWith("--nodeport-addresses")),
      "iptables: every address, its default",
    );
    const refused = (changed: string, pattern: RegExp) =>
      usageError(() => translate(readKubeProxyConfig(changed, "c").values, parseKubeProxyFlags([])), pattern);
    refused(
      text.replace("  localhostNodePorts: null", "  localhostNodePorts: true"),
      /iptables\.localhostNodePorts: true is not supported/,
    );
    refused(
      text.replace(/iptables:\n(( {2}.*\n)*?) {2}masqueradeBit: null/, "iptables:\n$1  masqueradeBit: 12"),
      /iptables\.masqueradeBit: 12 is not supported/,
    );
  });

  it("unknown fields are warnings that name them", () => {
    const t = run(`${KUBEADM_NFT}linux:\n  masqueradeAll: true\nconntrack2: 1\n`);
    assert.deepEqual(t.fileWarnings, [
      "config.conf: unknown field linux (not read by kpng)",
      "config.conf: unknown field conntrack2 (not read by kpng)",
    ]);
  });

  const refused: [string, string, RegExp][] = [
    ["ipvs mode", "mode: ipvs", /mode: ipvs: .*deprecated.*use mode: nftables/],
    ["unknown mode", "mode: userspace", /mode: unknown proxy mode "userspace"/],
    ["NodeCIDR detection", "detectLocalMode: NodeCIDR", /detectLocalMode: NodeCIDR is not supported/],
    [
      "bridge detection",
      "detectLocalMode: BridgeInterface",
      /detectLocalMode: BridgeInterface is not supported/,
    ],
    [
      "another masquerade bit",
      "nftables:\n  masqueradeBit: 12",
      /nftables\.masqueradeBit: 12 is not supported/,
    ],
    ["profiling", "enableProfiling: true", /enableProfiling: kpng serves no \/debug\/pprof/],
    [
      "primary and CIDRs",
      "nodePortAddresses: [primary, 10.0.0.0/8]",
      /nodePortAddresses: "primary" together/,
    ],
    ["loopback NodePorts", "nodePortAddresses: [127.0.0.0/8]", /localhost NodePorts are not supported/],
    ["a bad CIDR", "clusterCIDR: 10.0.0.0/33", /clusterCIDR: "10.0.0.0\/33" is not a CIDR/],
    ["a bad bind address", 'healthzBindAddress: "10256"', /healthzBindAddress: "10256" is not IP:port/],
    ["oomScoreAdj out of range", "oomScoreAdj: -1001", /oomScoreAdj: -1001 is outside/],
    ["a log format", "logging:\n  format: xml", /logging\.format: unknown format "xml"/],
  ];
  for (const [name, yaml, pattern] of refused) {
    it(`refuses ${name} at start, naming the field`, () => {
      usageError(
        () =>
          run(
            `apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n${yaml}\n`,
          ),
        pattern,
      );
    });
  }

  const badFiles: [string, string, RegExp][] = [
    [
      "the wrong kind",
      "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
      /kind is "KubeletConfiguration"; expected KubeProxyConfiguration/,
    ],
    [
      "the wrong apiVersion",
      "apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\n",
      /apiVersion is "kubeproxy.config.k8s.io\/v1alpha2"/,
    ],
    [
      "a field of the wrong type",
      "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nconntrack:\n  maxPerCore: lots\n",
      /field conntrack\.maxPerCore: expected an integer, got "lots"/,
    ],
    [
      "a bad duration",
      "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nsyncPeriod: soon\n",
      /field syncPeriod: "soon" is not a duration/,
    ],
    ["not YAML", "{ kind: [", /not YAML or JSON/],
    ["a list", "- 1\n- 2\n", /expected a KubeProxyConfiguration object/],
  ];
  for (const [name, text, pattern] of badFiles) {
    it(`a file with ${name} is one clear error`, () => {
      usageError(() => readKubeProxyConfig(text, "config.conf"), /^config\.conf: /);
      usageError(() => readKubeProxyConfig(text, "config.conf"), pattern);
    });
  }

  it("JSON works as YAML does", () => {
    const json = JSON.stringify({
      apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
      kind: "KubeProxyConfiguration",
      mode: "nftables",
      clusterCIDR: "10.244.0.0/16",
      nftables: { masqueradeAll: true },
    });
    assert.ok(sinkFlags(run(json)).includes("--masquerade-all"));
  });
});

describe("kube-proxy flags", () => {
  it("parses --flag=value, --flag value and bare booleans; --config, --cleanup and --master apart", () => {
    const f = parseKubeProxyFlags([
      "--config=/var/lib/kube-proxy/config.conf",
      "--hostname-override",
      "n1",
      "--masquerade-all",
      "--bind-address-hard-fail=false",
      "--feature-gates=A=true,B=false",
      "--master=https://192.0.2.10:6443",
    ]);
    assert.equal(f.configFile, "/var/lib/kube-proxy/config.conf");
    assert.equal(f.master, "https://192.0.2.10:6443");
    assert.equal(f.cleanup, false);
    assert.deepEqual(Object.fromEntries(f.overrides), {
      hostnameOverride: "n1",
      masqueradeAll: true,
      bindAddressHardFail: false,
      featureGates: { A: true, B: false },
    });
    assert.equal(parseKubeProxyFlags(["--cleanup"]).cleanup, true);
  });

  const bad: [string[], RegExp][] = [
    [["--no-such-flag"], /unknown flag --no-such-flag/],
    [["--kube-api-qps=fast"], /flag --kube-api-qps: expected an integer/],
    [["--iptables-sync-period=x"], /flag --iptables-sync-period: "x" is not a duration/],
    [["--hostname-override"], /flag --hostname-override needs a value/],
    [["stray"], /unexpected argument "stray"/],
  ];
  for (const [argv, pattern] of bad) {
    it(`refuses ${argv.join(" ")}`, () => usageError(() => parseKubeProxyFlags(argv), pattern));
  }
});

describe("translation → kpng command line", () => {
  it("keeps options this build lacks apart, for the caller to report", () => {
    const t = run(KUBEADM_NFT, ["--hostname-override=n1"]);
    const has = new Set([
      "--kubeconfig",
      "--node-name",
      "--cluster-cidr",
      "--nodeport-addresses",
      "--sync-period",
      "--min-sync-period",
      "--cleanup-kube-proxy",
    ]);
    const { argv, unavailable } = toKpngArgv(t, (_plugin, flag) => has.has(flag));
    assert.deepEqual(argv, [
      "kube",
      "--kubeconfig",
      "/var/lib/kube-proxy/kubeconfig.conf",
      "to-local",
      "to-nft",
      "--node-name",
      "n1",
      "--cluster-cidr",
      "10.244.0.0/16",
      "--nodeport-addresses",
      "primary",
      "--sync-period",
      "30s",
      "--min-sync-period",
      "1s",
      "--cleanup-kube-proxy",
    ]);
    assert.deepEqual(
      unavailable.map((o) => o.flag),
      [
        "--healthz-bind-address",
        "--metrics-bind-address",
        "--conntrack-max-per-core",
        "--conntrack-min",
        "--conntrack-tcp-timeout-established",
        "--conntrack-tcp-timeout-close-wait",
      ],
    );
  });
});
