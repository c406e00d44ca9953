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
      "--sync-period=30s",
      "--min-sync-period=1s",
      "--cluster-cidr=10.244.0.0/16",
      "--nodeport-addresses=primary",
      "--conntrack-max-per-core=32768",
      "--conntrack-min=131072",
      "--conntrack-tcp-timeout-established=24h0m0s",
      "--conntrack-tcp-timeout-close-wait=1h0m0s",
      "--cleanup-kube-proxy",
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
    assert.ok(flags.includes("--conntrack-max-per-core=0"), "0 leaves the limit alone, as in kube-proxy");
    assert.deepEqual(
      t.source.options.map((o) => `${o.flag}=${o.value}`),
      ["--master=https://192.0.2.10:6443", "--kubeconfig=/other"],
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

  it("iptables mode: its own section, every local address for NodePorts, localhost NodePorts", () => {
    const text = KUBEADM.replace(/^mode: ""$/m, "mode: iptables");
    const flags = (t: string) => sinkFlags(run(t));
    assert.equal(run(text).sink.name, "to-iptables");
    assert.ok(flags(text).includes("--nodeport-addresses=0.0.0.0/0,::/0"), "unset: every local address");
    assert.ok(flags(text).includes("--localhost-nodeports"), "kube-proxy's default: true");
    const off = text.replace("  localhostNodePorts: null", "  localhostNodePorts: false");
    assert.ok(!flags(off).includes("--localhost-nodeports"));
    const bit = text.replace(
      /iptables:\n(( {2}.*\n)*?) {2}masqueradeBit: null/,
      "iptables:\n$1  masqueradeBit: 12",
    );
    assert.ok(flags(bit).includes("--masquerade-bit=12"));
  });

  it("unknown fields are warnings that name them", () => {
    const t = run(`${KUBEADM_NFT}linux:\n  masqueradeAll: true\nconntrack2: 1\n`);
    assert.deepEqual(t.fileWarnings, [
      "config.conf: unknown field linux (not read by kpng)",
      "config.conf: unknown field conntrack2 (not read by kpng)",
    ]);
  });

  const HEADER = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";
  const file = (yaml: string) => `${HEADER}${yaml.includes("mode:") ? "" : "mode: nftables\n"}${yaml}\n`;

  const refused: [string, string, RegExp][] = [
    ["ipvs mode", "mode: ipvs", /mode: ipvs: .*deprecated.*use mode: nftables/],
    ["unknown mode", "mode: userspace", /mode: unknown proxy mode "userspace"/],
    ["an unknown detection mode", "detectLocalMode: Magic", /detectLocalMode: unknown mode "Magic"/],
    [
      "bridge detection without a bridge",
      "detectLocalMode: BridgeInterface",
      /detectLocal\.bridgeInterface: must be set with detectLocalMode: BridgeInterface/,
    ],
    [
      "a masquerade bit past 31",
      "nftables:\n  masqueradeBit: 32",
      /nftables\.masqueradeBit: 32 is outside \[0, 31\]/,
    ],
    // kube-proxy's validation refuses the mix too.
    [
      "primary and CIDRs",
      "nodePortAddresses: [primary, 10.0.0.0/8]",
      /nodePortAddresses: can't use both "primary" and CIDRs/,
    ],
    ["a bad CIDR", "clusterCIDR: 10.0.0.0/33", /clusterCIDR: "10.0.0.0\/33" is not a CIDR/],
    [
      "a bad bind address",
      'healthzBindAddress: "localhost"',
      /healthzBindAddress: "localhost" is not an IP or IP:port/,
    ],
    ["oomScoreAdj out of range", "oomScoreAdj: -1001", /oomScoreAdj: -1001 is outside/],
    ["a log format", "logging:\n  format: xml", /logging\.format: unknown format "xml"/],
    ["a negative burst", "clientConnection:\n  burst: -1", /clientConnection\.burst: -1 is outside/],
  ];
  for (const [name, yaml, pattern] of refused) {
    it(`refuses ${name} at start, naming the field`, () => usageError(() => run(file(yaml)), pattern));
  }

  /** What kube-proxy accepts, and the kpng options it adds to a minimal nftables-mode file's. */
  const accepted: [string, string, string[]][] = [
    ["a masquerade bit other than 14", "nftables:\n  masqueradeBit: 0", ["--masquerade-bit=0"]],
    ["the default masquerade bit", "nftables:\n  masqueradeBit: 14", []],
    ["profiling", "enableProfiling: true", ["--profiling"]],
    ["a float qps", "clientConnection:\n  qps: 2.5", []],
    ["NodeCIDR detection", "detectLocalMode: NodeCIDR", ["--detect-local-mode=NodeCIDR"]],
    [
      "bridge detection",
      "detectLocalMode: BridgeInterface\ndetectLocal:\n  bridgeInterface: cbr0",
      ["--detect-local-mode=BridgeInterface", "--pod-bridge-interface=cbr0"],
    ],
    [
      "interface prefix detection",
      "detectLocalMode: InterfaceNamePrefix\ndetectLocal:\n  interfaceNamePrefix: veth",
      ["--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=veth"],
    ],
    ["primary", "nodePortAddresses: [primary]", []],
    [
      "CIDRs",
      "nodePortAddresses: [192.0.2.0/24, 2001:db8::/64]",
      ["--nodeport-addresses=192.0.2.0/24,2001:db8::/64"],
    ],
    ["a bare healthz IP", "healthzBindAddress: 192.0.2.1", ["--healthz-bind-address=192.0.2.1:10256"]],
    ["a bare IPv6 metrics IP", 'metricsBindAddress: "::1"', ["--metrics-bind-address=[::1]:10249"]],
    [
      "an IPv6 bindAddress (the server defaults follow it)",
      'bindAddress: "::"',
      ["--healthz-bind-address=[::]:10256", "--metrics-bind-address=[::1]:10249"],
    ],
    ["bindAddressHardFail", "bindAddressHardFail: true", ["--bind-address-hard-fail"]],
    [
      "conntrack zeros (leave the sysctls alone)",
      "conntrack:\n  maxPerCore: 0\n  min: 0\n  tcpEstablishedTimeout: 0s\n  tcpCloseWaitTimeout: 0s",
      [
        "--conntrack-max-per-core=0",
        "--conntrack-min=0",
        "--conntrack-tcp-timeout-established=0s",
        "--conntrack-tcp-timeout-close-wait=0s",
      ],
    ],
    [
      "conntrack UDP timeouts and liberal TCP",
      "conntrack:\n  tcpBeLiberal: true\n  udpTimeout: 30s\n  udpStreamTimeout: 2m",
      ["--conntrack-tcp-be-liberal", "--conntrack-udp-timeout=30s", "--conntrack-udp-timeout-stream=2m"],
    ],
  ];
  for (const [name, yaml, expected] of accepted) {
    it(`accepts ${name}`, () => {
      const base = sinkFlags(run(file("")));
      const t = run(file(yaml));
      assert.deepEqual(
        sinkFlags(t).filter((f) => !base.includes(f)),
        expected,
      );
    });
  }

  /** Fields the kube source applies, and the source options they become (none at the defaults). */
  const sourceFields: [string, string, string[]][] = [
    [
      "kube-proxy's qps, burst and resync period",
      "clientConnection:\n  qps: 5\n  burst: 10\nconfigSyncPeriod: 15m0s",
      [],
    ],
    ["a float qps", "clientConnection:\n  qps: 2.5", ["--kube-api-qps=2.5"]],
    ["a negative qps: no limit, as client-go", "clientConnection:\n  qps: -1", ["--kube-api-qps=-1"]],
    ["a zero qps and burst: the defaults, as client-go", "clientConnection:\n  qps: 0\n  burst: 0", []],
    ["a burst", "clientConnection:\n  burst: 50", ["--kube-api-burst=50"]],
    ["a resync period", "configSyncPeriod: 1m", ["--config-sync-period=1m"]],
  ];
  for (const [name, yaml, expected] of sourceFields) {
    it(`applies ${name} to the kube source`, () => {
      const { options } = run(file(yaml)).source;
      const kube = options.filter((o) => /^--(kube-api|config-sync)/.test(o.flag));
      assert.deepEqual(
        kube.map((o) => `${o.flag}=${o.value}`),
        expected,
      );
    });
  }

  it("loopback NodePort CIDRs in nftables mode: a warning, as kube-proxy logs it", () => {
    const t = run(file("nodePortAddresses: [127.0.0.0/8]"));
    assert.match(t.warnings.join("\n"), /127\.0\.0\.0\/8: localhost NodePorts are not supported here/);
  });

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
    // With --config, kube-proxy ignores the flags that set fields, except --hostname-override and logging.
    assert.deepEqual(Object.fromEntries(f.overrides), { hostnameOverride: "n1" });
    assert.deepEqual(f.ignored, ["--masquerade-all", "--bind-address-hard-fail", "--feature-gates"]);
    assert.equal(parseKubeProxyFlags(["--cleanup"]).cleanup, true);
  });

  it("without --config every flag counts", () => {
    const f = parseKubeProxyFlags(["--masquerade-all", "--feature-gates=A=true,B=false", "--v=2"]);
    assert.deepEqual(Object.fromEntries(f.overrides), {
      masqueradeAll: true,
      featureGates: { A: true, B: false },
      "logging.verbosity": 2,
    });
    assert.deepEqual(f.ignored, []);
  });

  it("--config keeps the logging flags (as kube-proxy copies them over)", () => {
    const f = parseKubeProxyFlags(["--config=/c", "--v=4", "--vmodule=proxier=5", "--logging-format=json"]);
    assert.deepEqual(Object.fromEntries(f.overrides), {
      "logging.verbosity": 4,
      "logging.vmodule": "proxier=5",
      "logging.format": "json",
    });
  });

  it("accepts the housekeeping flags and _ spellings", () => {
    assert.equal(parseKubeProxyFlags(["--version"]).version, true);
    assert.equal(parseKubeProxyFlags(["--version=raw"]).version, true);
    assert.equal(parseKubeProxyFlags(["--write-config-to", "/tmp/x"]).writeConfigTo, "/tmp/x");
    assert.equal(parseKubeProxyFlags(["--init-only"]).initOnly, true);
    const f = parseKubeProxyFlags([
      "--log_flush_frequency=5s",
      "--hostname_override=n2",
      "--kube-api-qps=2.5",
    ]);
    assert.deepEqual(Object.fromEntries(f.overrides), {
      "logging.flushFrequency": "5s",
      hostnameOverride: "n2",
      "clientConnection.qps": 2.5,
    });
  });

  it("--healthz-port and --metrics-port set the port of the bind addresses; 0 turns the server off", () => {
    const t = translate(new Map(), parseKubeProxyFlags(["--healthz-port=0", "--metrics-port=10300"]));
    assert.ok(sinkFlags(t).includes("--healthz-bind-address="));
    assert.ok(sinkFlags(t).includes("--metrics-bind-address=127.0.0.1:10300"));
    assert.deepEqual(parseKubeProxyFlags(["--config=/c", "--healthz-port=1"]).ignored, ["--healthz-port"]);
  });

  const bad: [string[], RegExp][] = [
    [["--no-such-flag"], /unknown flag --no-such-flag/],
    [["--kube-api-qps=fast"], /flag --kube-api-qps: expected a number/],
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
      "--sync-period",
      "30s",
      "--min-sync-period",
      "1s",
      "--cluster-cidr",
      "10.244.0.0/16",
      "--nodeport-addresses",
      "primary",
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
