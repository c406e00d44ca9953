// The one table of kube-proxy's configuration: each KubeProxyConfiguration field
// (kubeproxy.config.k8s.io/v1alpha1), the kube-proxy flag that sets it, kube-proxy's default, and
// how kpng applies it. The file reader, the flag parser, translate() and the docs test all read
// this table; docs/kube-proxy-compat.md is its prose form.

import { joinHostPort, splitHostPort } from "../lib/host-port.ts";
import { familyOfAddress, parseCidr } from "../model/ip.ts";
import { parseDuration } from "../plugin/duration.ts";
import { UsageError } from "../plugin/usage-error.ts";
import type { ProxyMode } from "./backend-choice.ts";

// kpng's kube source defaults are kube-proxy's: only other values become its flags.
const DEFAULT_QPS = 5;
const DEFAULT_BURST = 10;
const DEFAULT_CONFIG_SYNC_PERIOD_MS = 15 * 60_000;

export type FieldType =
  | "string"
  | "bool"
  | "int"
  | "float"
  | "duration"
  | "stringList"
  | "boolMap"
  | "object"
  | "any";

export const API_VERSION = "kubeproxy.config.k8s.io/v1alpha1";
export const KIND = "KubeProxyConfiguration";

/** What an `apply` may do: read other fields, add kpng options, warn. */
export interface ApplyContext {
  readonly mode: ProxyMode;
  /** Another field's value: as given, else kube-proxy's default, else undefined. */
  value(field: string): unknown;
  given(field: string): boolean;
  /** A kube source option (`--kubeconfig`, …). */
  source(flag: string, value: string | boolean): void;
  /** An option of the backend's sink (`--sync-period`, …). */
  sink(flag: string, value: string | boolean): void;
  warn(text: string): void;
}

export interface FieldRow {
  readonly field: string;
  readonly type: FieldType;
  /** kube-proxy's flag for the field, without dashes. */
  readonly flag?: string;
  /** kube-proxy's default, used when the field is absent, null, or (unless `pointer`) zero. */
  readonly default?: unknown;
  /** kube-proxy's default when it depends on other fields (in place of `default`). */
  readonly defaultFrom?: (value: (field: string) => unknown) => unknown;
  /** kube-proxy reads it through a pointer: only absent or null means "default"; 0 is a value. */
  readonly pointer?: boolean;
  /** The proxy modes the field belongs to; in another mode a non-default value is a warning. */
  readonly modes?: readonly string[];
  /** How kpng applies the value (the default when not given); throws UsageError when it cannot. */
  readonly apply?: (value: unknown, c: ApplyContext, given: boolean) => void;
}

/** A bind address turned off on the command line (an empty flag, or --healthz-port=0). */
export const OFF = "off";

const HEALTHZ_PORT = 10256;
const METRICS_PORT = 10249;

const text = (v: unknown): string => (typeof v === "string" ? v.trim() : "");

/** A duration that must be more than zero (kube-proxy's validation). */
function positive(field: string, v: unknown): string {
  if (parseDuration(text(v)) <= 0) throw new UsageError(`${field}: must be greater than 0 (got ${v})`);
  return text(v);
}

function inRange(field: string, v: unknown, min: number, max: number): number {
  const n = Number(v);
  if (!(n >= min && n <= max)) throw new UsageError(`${field}: ${v} is outside [${min}, ${max}]`);
  return n;
}

/**
 * kube-proxy's bind address rules (after defaulting): a bare IP gets the default port;
 * otherwise IP:port; OFF (from the command line) turns the server off.
 */
function bindAddress(field: string, v: unknown, port: number): string {
  const t = text(v);
  if (t === OFF) return "";
  const bare = t.replace(/^\[(.*)\]$/, "$1");
  if (familyOfAddress(bare) !== undefined) return joinHostPort(bare, port);
  const address = splitHostPort(t);
  if (address === undefined || familyOfAddress(address.host) === undefined)
    throw new UsageError(`${field}: "${t}" is not an IP or IP:port (e.g. 0.0.0.0:${port} or [::]:${port})`);
  return t;
}

function cidrList(field: string, items: readonly string[]): string[] {
  return items
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((c) => {
      const cidr = parseCidr(c);
      if (cidr === undefined) throw new UsageError(`${field}: "${c}" is not a CIDR (e.g. 10.244.0.0/16)`);
      return cidr.text;
    });
}

/**
 * nodePortAddresses as upstream: unset is every local address in iptables mode and the node's
 * primary IPs in nftables mode; "primary" alone, or CIDRs. Loopback CIDRs give localhost NodePorts
 * only in iptables mode (IPv4); elsewhere kube-proxy ignores them with a message, as here.
 */
function nodePortAddresses(v: unknown, c: ApplyContext): void {
  const items = (Array.isArray(v) ? (v as string[]) : []).map((s) => s.trim()).filter((s) => s !== "");
  if (items.includes("primary") && items.length > 1)
    throw new UsageError(`nodePortAddresses: can't use both "primary" and CIDRs (as kube-proxy)`);
  const cidrs = items.includes("primary") ? [] : cidrList("nodePortAddresses", items);
  const loopback = cidrs.filter((x) => x.startsWith("127.") || x === "::1/128");
  if (loopback.length > 0 && (c.mode === "nftables" || loopback.includes("::1/128")))
    c.warn(`nodePortAddresses: ${loopback.join(", ")}: localhost NodePorts are not supported here; ignored`);
  const unset = c.mode === "nftables" ? "primary" : "0.0.0.0/0,::/0";
  c.sink("--nodeport-addresses", items.includes("primary") ? "primary" : cidrs.join(",") || unset);
}

/** The active mode's section wins over the top-level sync periods (kube-proxy's conversion). */
function syncPeriod(flag: string, section: boolean, mustBePositive: boolean) {
  return (v: unknown, c: ApplyContext, given: boolean): void => {
    const field = flag === "--sync-period" ? "syncPeriod" : "minSyncPeriod";
    if (section ? !given : c.given(`${c.mode}.${field}`)) return;
    c.sink(flag, mustBePositive ? positive(field, v) : text(v));
  };
}

/** Bit 14 (0x4000) is the backends' own default: only another bit is passed on. */
function masqueradeBit(v: unknown, c: ApplyContext): void {
  const bit = inRange(`${c.mode}.masqueradeBit`, v, 0, 31);
  if (bit !== 14) c.sink("--masquerade-bit", String(bit));
}

const conntrackCount = (flag: string) => (v: unknown, c: ApplyContext) => {
  c.sink(flag, String(inRange(flag.slice(2), v, 0, 2 ** 31 - 1)));
};
/** 0 leaves the sysctl alone (kube-proxy's rule for every conntrack setting). */
const conntrackTime = (flag: string) => (v: unknown, c: ApplyContext) => {
  if (parseDuration(text(v) || "0s") < 0) throw new UsageError(`${flag.slice(2)}: must not be negative`);
  c.sink(flag, text(v) || "0s");
};
const sinkFlag = (flag: string) => (v: unknown, c: ApplyContext) => {
  if (v === true) c.sink(flag, true);
};

export const TABLE: readonly FieldRow[] = [
  { field: "apiVersion", type: "string" },
  { field: "kind", type: "string" },
  { field: "featureGates", type: "boolMap", flag: "feature-gates", apply: featureGates },
  { field: "clientConnection", type: "object" },
  {
    field: "clientConnection.kubeconfig",
    type: "string",
    flag: "kubeconfig",
    apply: (v, c) => text(v) !== "" && c.source("--kubeconfig", text(v)),
  },
  { field: "clientConnection.acceptContentTypes", type: "string" },
  { field: "clientConnection.contentType", type: "string", flag: "kube-api-content-type" },
  // The kube source's token bucket (kpng's defaults are kube-proxy's). A negative qps turns the
  // limit off, as client-go.
  {
    field: "clientConnection.qps",
    type: "float",
    flag: "kube-api-qps",
    default: DEFAULT_QPS,
    apply: (v, c) => {
      const qps = inRange("clientConnection.qps", v, -1e9, 1e9);
      if (qps !== DEFAULT_QPS) c.source("--kube-api-qps", String(qps));
    },
  },
  {
    field: "clientConnection.burst",
    type: "int",
    flag: "kube-api-burst",
    default: DEFAULT_BURST,
    apply: (v, c) => {
      const burst = inRange("clientConnection.burst", v, 0, 2 ** 31 - 1);
      if (burst !== DEFAULT_BURST) c.source("--kube-api-burst", String(burst));
    },
  },
  { field: "logging", type: "object" },
  { field: "logging.format", type: "string", flag: "logging-format", apply: logFormat },
  { field: "logging.flushFrequency", type: "any", flag: "log-flush-frequency" },
  { field: "logging.verbosity", type: "int", flag: "v" },
  { field: "logging.vmodule", type: "any", flag: "vmodule" },
  { field: "logging.options", type: "any" },
  {
    field: "hostnameOverride",
    type: "string",
    flag: "hostname-override",
    apply: (v, c) => text(v) !== "" && c.sink("--node-name", text(v).toLowerCase()),
  },
  { field: "bindAddress", type: "string", flag: "bind-address", default: "0.0.0.0", apply: bindAddressField },
  {
    field: "healthzBindAddress",
    type: "string",
    flag: "healthz-bind-address",
    defaultFrom: (value) => defaultBind(value("bindAddress"), HEALTHZ_PORT, false),
    apply: (v, c) => c.sink("--healthz-bind-address", bindAddress("healthzBindAddress", v, HEALTHZ_PORT)),
  },
  {
    field: "metricsBindAddress",
    type: "string",
    flag: "metrics-bind-address",
    defaultFrom: (value) => defaultBind(value("bindAddress"), METRICS_PORT, true),
    apply: (v, c) => c.sink("--metrics-bind-address", bindAddress("metricsBindAddress", v, METRICS_PORT)),
  },
  {
    field: "bindAddressHardFail",
    type: "bool",
    flag: "bind-address-hard-fail",
    apply: sinkFlag("--bind-address-hard-fail"),
  },
  { field: "enableProfiling", type: "bool", flag: "profiling", apply: sinkFlag("--profiling") },
  { field: "showHiddenMetricsForVersion", type: "string", flag: "show-hidden-metrics-for-version" },
  { field: "mode", type: "string", flag: "proxy-mode" },
  // Without --config, kube-proxy's --iptables-*sync-period flags set these (in every mode but ipvs).
  {
    field: "syncPeriod",
    type: "duration",
    flag: "iptables-sync-period",
    default: "30s",
    apply: syncPeriod("--sync-period", false, true),
  },
  {
    field: "minSyncPeriod",
    type: "duration",
    flag: "iptables-min-sync-period",
    default: "1s",
    apply: syncPeriod("--min-sync-period", false, false),
  },
  ...(["iptables", "nftables"] as const).flatMap((mode): FieldRow[] => [
    { field: mode, type: "object" },
    {
      field: `${mode}.masqueradeAll`,
      type: "bool",
      modes: [mode],
      apply: (v, c) => (v === true || c.value("masqueradeAll") === true) && c.sink("--masquerade-all", true),
    },
    {
      field: `${mode}.masqueradeBit`,
      type: "int",
      flag: mode === "iptables" ? "iptables-masquerade-bit" : undefined,
      default: 14,
      pointer: true,
      modes: [mode],
      apply: masqueradeBit,
    },
    {
      field: `${mode}.syncPeriod`,
      type: "duration",
      default: "30s",
      modes: [mode],
      apply: syncPeriod("--sync-period", true, true),
    },
    {
      field: `${mode}.minSyncPeriod`,
      type: "duration",
      default: "1s",
      modes: [mode],
      apply: syncPeriod("--min-sync-period", true, false),
    },
  ]),
  // kube-proxy applies --masquerade-all to whichever mode runs (the mode rows read it).
  { field: "masqueradeAll", type: "bool", flag: "masquerade-all" },
  {
    field: "iptables.localhostNodePorts",
    type: "bool",
    flag: "iptables-localhost-nodeports",
    default: true,
    pointer: true,
    modes: ["iptables"],
    apply: (v, c) => v === true && c.sink("--localhost-nodeports", true),
  },
  { field: "ipvs", type: "object" },
  ...(
    [
      ["syncPeriod", "duration", "ipvs-sync-period", "30s"],
      ["minSyncPeriod", "duration", "ipvs-min-sync-period"],
      ["scheduler", "string", "ipvs-scheduler"],
      ["excludeCIDRs", "stringList", "ipvs-exclude-cidrs"],
      ["strictARP", "bool", "ipvs-strict-arp"],
      ["tcpTimeout", "duration", "ipvs-tcp-timeout"],
      ["tcpFinTimeout", "duration", "ipvs-tcpfin-timeout"],
      ["udpTimeout", "duration", "ipvs-udp-timeout"],
    ] as const
  ).map(([f, type, flag, d]): FieldRow => ({ field: `ipvs.${f}`, type, flag, default: d, modes: ["ipvs"] })),
  { field: "winkernel", type: "object" },
  ...(
    [
      ["networkName", "string"],
      ["sourceVip", "string"],
      ["enableDSR", "bool"],
      ["rootHnsEndpointName", "string"],
      ["forwardHealthCheckVip", "bool"],
    ] as const
  ).map(([f, type]): FieldRow => ({ field: `winkernel.${f}`, type, modes: ["kernelspace"] })),
  { field: "windowsRunAsService", type: "bool", flag: "windows-service", modes: ["kernelspace"] },
  {
    field: "detectLocalMode",
    type: "string",
    flag: "detect-local-mode",
    default: "ClusterCIDR",
    apply: detectLocal,
  },
  { field: "detectLocal", type: "object" },
  { field: "detectLocal.bridgeInterface", type: "string", flag: "pod-bridge-interface" },
  { field: "detectLocal.interfaceNamePrefix", type: "string", flag: "pod-interface-name-prefix" },
  { field: "clusterCIDR", type: "string", flag: "cluster-cidr" },
  { field: "nodePortAddresses", type: "stringList", flag: "nodeport-addresses", apply: nodePortAddresses },
  {
    field: "oomScoreAdj",
    type: "int",
    flag: "oom-score-adj",
    default: -999,
    pointer: true,
    apply: (v) => inRange("oomScoreAdj", v, -1000, 1000),
  },
  { field: "conntrack", type: "object" },
  {
    field: "conntrack.maxPerCore",
    type: "int",
    flag: "conntrack-max-per-core",
    default: 32768,
    pointer: true,
    apply: conntrackCount("--conntrack-max-per-core"),
  },
  {
    field: "conntrack.min",
    type: "int",
    flag: "conntrack-min",
    default: 131072,
    pointer: true,
    apply: conntrackCount("--conntrack-min"),
  },
  {
    field: "conntrack.tcpEstablishedTimeout",
    type: "duration",
    flag: "conntrack-tcp-timeout-established",
    default: "24h0m0s",
    pointer: true,
    apply: conntrackTime("--conntrack-tcp-timeout-established"),
  },
  {
    field: "conntrack.tcpCloseWaitTimeout",
    type: "duration",
    flag: "conntrack-tcp-timeout-close-wait",
    default: "1h0m0s",
    pointer: true,
    apply: conntrackTime("--conntrack-tcp-timeout-close-wait"),
  },
  {
    field: "conntrack.tcpBeLiberal",
    type: "bool",
    flag: "conntrack-tcp-be-liberal",
    apply: sinkFlag("--conntrack-tcp-be-liberal"),
  },
  {
    field: "conntrack.udpTimeout",
    type: "duration",
    flag: "conntrack-udp-timeout",
    apply: (v, c, given) => given && conntrackTime("--conntrack-udp-timeout")(v, c),
  },
  {
    field: "conntrack.udpStreamTimeout",
    type: "duration",
    flag: "conntrack-udp-timeout-stream",
    apply: (v, c, given) => given && conntrackTime("--conntrack-udp-timeout-stream")(v, c),
  },
  {
    field: "configSyncPeriod",
    type: "duration",
    flag: "config-sync-period",
    default: "15m",
    apply: (v, c) => {
      const period = positive("configSyncPeriod", v);
      if (parseDuration(period) !== DEFAULT_CONFIG_SYNC_PERIOD_MS) c.source("--config-sync-period", period);
    },
  },
  { field: "portRange", type: "string", flag: "proxy-port-range" },
];

/** Dotted path → type, for the file reader. */
export const FIELDS: Readonly<Record<string, FieldType>> = Object.fromEntries(
  TABLE.map((r) => [r.field, r.type]),
);

function featureGates(v: unknown, c: ApplyContext): void {
  for (const gate of Object.keys((v as Record<string, boolean> | undefined) ?? {}))
    c.warn(`featureGates.${gate}: kpng has no feature gates; it behaves as kube-proxy with its GA features`);
}

function logFormat(v: unknown): void {
  // kpng logs JSON lines either way; "text" is kube-proxy's default, so nearly every file says it.
  if (text(v) !== "" && text(v) !== "text" && text(v) !== "json")
    throw new UsageError(`logging.format: unknown format "${text(v)}" (text or json)`);
}

/** The servers' default address: IPv6 when bindAddress is IPv6 (metrics on the loopback). */
function defaultBind(bind: unknown, port: number, loopback: boolean): string {
  const v6 = familyOfAddress(text(bind)) === "IPv6";
  return `${v6 ? (loopback ? "[::1]" : "[::]") : loopback ? "127.0.0.1" : "0.0.0.0"}:${port}`;
}

function bindAddressField(v: unknown, c: ApplyContext): void {
  const ip = text(v);
  if (familyOfAddress(ip) === undefined) throw new UsageError(`bindAddress: "${ip}" is not an IP address`);
  if (ip !== "0.0.0.0" && ip !== "::")
    c.warn(
      `bindAddress: ${ip} is not used as the node IP: kpng takes the node's primary addresses from its default routes`,
    );
}

/** How pod traffic is told apart: by source CIDR, by the Node's podCIDRs, or by interface. */
function detectLocal(v: unknown, c: ApplyContext): void {
  const mode = text(v);
  const cidrs = cidrList("clusterCIDR", text(c.value("clusterCIDR")).split(","));
  if (mode === "ClusterCIDR") {
    if (cidrs.length === 0)
      c.warn("clusterCIDR is empty: traffic from pods is not told apart from off-cluster traffic");
    else c.sink("--cluster-cidr", cidrs.join(","));
    return;
  }
  const iface = { BridgeInterface: "bridgeInterface", InterfaceNamePrefix: "interfaceNamePrefix" }[mode];
  if (mode !== "NodeCIDR" && iface === undefined)
    throw new UsageError(
      `detectLocalMode: unknown mode "${mode}" (ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix)`,
    );
  if (iface !== undefined && text(c.value(`detectLocal.${iface}`)) === "")
    throw new UsageError(`detectLocal.${iface}: must be set with detectLocalMode: ${mode}`);
  c.sink("--detect-local-mode", mode);
  if (iface !== undefined)
    c.sink(
      `--pod-${iface === "bridgeInterface" ? "bridge-interface" : "interface-name-prefix"}`,
      text(c.value(`detectLocal.${iface}`)),
    );
}
