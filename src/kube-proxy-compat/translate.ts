// KubeProxyConfiguration + kube-proxy flags → what kpng runs: the kube source's options, the
// backend (a local sink) and its options, named by their kpng flags, plus warnings. Pure.
//
// kube-proxy's defaults apply where a field is absent, null or zero, as kube-proxy defaults them.
// A field kpng cannot honour throws a UsageError naming it and saying why; a field that has no
// effect here but is harmless is a warning. docs/kube-proxy-compat.md is the table of all of them.

import { splitHostPort } from "../lib/host-port.ts";
import { familyOfAddress, parseCidr } from "../model/ip.ts";
import { parseDuration } from "../plugin/duration.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { type BackendChoice, backendForMode, type ProxyMode } from "./backend-choice.ts";
import type { ConfigValues } from "./config-file.ts";
import type { ParsedFlags } from "./flags.ts";

/** One option of a kpng plug-in, named by its flag, and the field or flag it came from. */
export interface KpngOption {
  readonly flag: string;
  readonly value: string | boolean;
  readonly from: string;
  /** True when the value is kube-proxy's default (the field was not set). */
  readonly defaulted: boolean;
}

export interface Translation {
  readonly mode: ProxyMode;
  readonly source: { readonly name: "kube"; readonly options: readonly KpngOption[] };
  readonly sink: { readonly name: string; readonly options: readonly KpngOption[] };
  /** oom_score_adj for the process (kube-proxy's default: -999). */
  readonly oomScoreAdj: number;
  /** The log level kube-proxy's verbosity maps to. */
  readonly logLevel: "info" | "debug" | "trace";
  readonly warnings: readonly string[];
}

/** kube-proxy's defaults (pkg/proxy/apis/config/v1alpha1 defaulting), where kpng uses them. */
const KUBE_PROXY_DEFAULTS = {
  healthzBindAddress: "0.0.0.0:10256",
  metricsBindAddress: "127.0.0.1:10249",
  syncPeriod: "30s",
  minSyncPeriod: "1s",
  masqueradeBit: 14,
  oomScoreAdj: -999,
  "conntrack.maxPerCore": 32768,
  "conntrack.min": 131072,
  "conntrack.tcpEstablishedTimeout": "24h0m0s",
  "conntrack.tcpCloseWaitTimeout": "1h0m0s",
} as const;

/**
 * kube-proxy's defaults in the sections of modes other than the running one: a file with every
 * default written out (as `kube-proxy --write-config-to` makes) draws no warning for them.
 */
const INACTIVE_DEFAULTS: Readonly<Record<string, unknown>> = {
  "iptables.masqueradeBit": 14,
  "iptables.syncPeriod": "30s",
  "iptables.minSyncPeriod": "1s",
  "iptables.localhostNodePorts": true,
  "nftables.masqueradeBit": 14,
  "nftables.syncPeriod": "30s",
  "nftables.minSyncPeriod": "1s",
  "ipvs.syncPeriod": "30s",
};

/** The bit kpng's nft backend marks packets to masquerade with (0x4000). */
const NFT_MASQUERADE_BIT = 14;

/** `pick` chooses the backend for the mode; tests pass one that knows backends this build lacks. */
export function translate(
  file: ConfigValues,
  flags: ParsedFlags,
  pick: (mode: string) => BackendChoice = backendForMode,
): Translation {
  const values = new Map([...file, ...flags.overrides]);
  const warnings: string[] = [];
  const get = (path: string): unknown => values.get(path);
  const str = (path: string): string => {
    const v = get(path);
    return typeof v === "string" ? v.trim() : "";
  };
  const isSet = (path: string): boolean => !isZero(get(path));

  const { mode, sink } = pick(str("mode"));
  const section = mode === "nftables" ? "nftables" : "iptables";
  const otherSection = mode === "nftables" ? "iptables" : "nftables";

  const source: KpngOption[] = [];
  const sinkOptions: KpngOption[] = [];
  const add = (
    into: KpngOption[],
    flag: string,
    from: string,
    value: string | boolean | undefined,
    fallback?: string | boolean,
  ) => {
    if (value !== undefined && !isZero(value)) into.push({ flag, value, from, defaulted: false });
    else if (fallback !== undefined) into.push({ flag, value: fallback, from, defaulted: true });
  };

  // Connection to the API server.
  add(source, "--kubeconfig", "clientConnection.kubeconfig", str("clientConnection.kubeconfig"));
  add(source, "--master", "--master", flags.master);
  for (const path of ["clientConnection.qps", "clientConnection.burst"]) {
    const n = get(path);
    if (typeof n === "number" && n < 0) throw new UsageError(`${path}: must not be negative (got ${n})`);
  }

  // Identity.
  const hostname = str("hostnameOverride").toLowerCase();
  add(sinkOptions, "--node-name", "hostnameOverride", hostname);
  const bind = str("bindAddress");
  if (bind !== "" && bind !== "0.0.0.0" && bind !== "::") {
    if (familyOfAddress(bind) === undefined)
      throw new UsageError(`bindAddress: "${bind}" is not an IP address`);
    warnings.push(
      `bindAddress: ${bind} is not used: kpng takes the node's primary addresses from its default routes`,
    );
  }

  // Node services (health and metrics servers).
  add(
    sinkOptions,
    "--healthz-bind-address",
    "healthzBindAddress",
    hostPort("healthzBindAddress", str("healthzBindAddress")),
    KUBE_PROXY_DEFAULTS.healthzBindAddress,
  );
  add(
    sinkOptions,
    "--metrics-bind-address",
    "metricsBindAddress",
    hostPort("metricsBindAddress", str("metricsBindAddress")),
    KUBE_PROXY_DEFAULTS.metricsBindAddress,
  );
  add(sinkOptions, "--bind-address-hard-fail", "bindAddressHardFail", get("bindAddressHardFail") === true);
  add(
    sinkOptions,
    "--show-hidden-metrics-for-version",
    "showHiddenMetricsForVersion",
    str("showHiddenMetricsForVersion"),
  );
  if (get("enableProfiling") === true) {
    throw new UsageError("enableProfiling: kpng serves no /debug/pprof endpoint; set it to false");
  }

  // Pod traffic detection and NodePort addresses.
  const detect = str("detectLocalMode") || "ClusterCIDR";
  if (detect !== "ClusterCIDR") {
    throw new UsageError(
      `detectLocalMode: ${detect} is not supported: kpng tells pod traffic by its source CIDR (detectLocalMode: ClusterCIDR with clusterCIDR)`,
    );
  }
  const podCIDRs = cidrList("clusterCIDR", str("clusterCIDR").split(","));
  if (podCIDRs.length === 0) {
    warnings.push("clusterCIDR is empty: traffic from pods is not told apart from off-cluster traffic");
  }
  add(sinkOptions, "--cluster-cidr", "clusterCIDR", podCIDRs.join(","));
  add(
    sinkOptions,
    "--nodeport-addresses",
    "nodePortAddresses",
    nodePortAddresses(mode, get("nodePortAddresses")),
  );

  // The backend's own section.
  const masqueradeBit = get(`${section}.masqueradeBit`);
  if (typeof masqueradeBit === "number" && masqueradeBit !== NFT_MASQUERADE_BIT) {
    throw new UsageError(
      `${section}.masqueradeBit: ${masqueradeBit} is not supported: kpng's backends mark with bit ${NFT_MASQUERADE_BIT} (0x4000)`,
    );
  }
  add(
    sinkOptions,
    "--masquerade-all",
    get("masqueradeAll") === true ? "--masquerade-all" : `${section}.masqueradeAll`,
    get(`${section}.masqueradeAll`) === true || get("masqueradeAll") === true,
  );
  add(
    sinkOptions,
    "--sync-period",
    isSet(`${section}.syncPeriod`) ? `${section}.syncPeriod` : "syncPeriod",
    positiveDuration(`${section}.syncPeriod`, str(`${section}.syncPeriod`)) ||
      positiveDuration("syncPeriod", str("syncPeriod")),
    KUBE_PROXY_DEFAULTS.syncPeriod,
  );
  add(
    sinkOptions,
    "--min-sync-period",
    isSet(`${section}.minSyncPeriod`) ? `${section}.minSyncPeriod` : "minSyncPeriod",
    positiveDuration(`${section}.minSyncPeriod`, str(`${section}.minSyncPeriod`)) ||
      positiveDuration("minSyncPeriod", str("minSyncPeriod")),
    KUBE_PROXY_DEFAULTS.minSyncPeriod,
  );
  if (mode === "iptables" && get("iptables.localhostNodePorts") === true) {
    // false is what kpng does; unset means kube-proxy's default, which kpng documents it differs on.
    throw new UsageError(
      "iptables.localhostNodePorts: true is not supported: kpng's iptables backend does not accept NodePort traffic on 127.0.0.1 (as kube-proxy's nftables mode); set it to false or leave it unset",
    );
  }
  // Two proxies on one node fight: replacing kube-proxy means removing what it left.
  sinkOptions.push({ flag: "--cleanup-kube-proxy", value: true, from: "(kpng kube-proxy)", defaulted: true });

  // Conntrack settings.
  for (const [field, flag] of [
    ["conntrack.maxPerCore", "--conntrack-max-per-core"],
    ["conntrack.min", "--conntrack-min"],
  ] as const) {
    const n = get(field);
    if (typeof n === "number" && n < 0) throw new UsageError(`${field}: must not be negative (got ${n})`);
    add(
      sinkOptions,
      flag,
      field,
      typeof n === "number" ? String(n) : undefined,
      String(KUBE_PROXY_DEFAULTS[field]),
    );
  }
  for (const [field, flag] of [
    ["conntrack.tcpEstablishedTimeout", "--conntrack-tcp-timeout-established"],
    ["conntrack.tcpCloseWaitTimeout", "--conntrack-tcp-timeout-close-wait"],
  ] as const) {
    add(sinkOptions, flag, field, positiveDuration(field, str(field)), KUBE_PROXY_DEFAULTS[field]);
  }
  add(
    sinkOptions,
    "--conntrack-tcp-be-liberal",
    "conntrack.tcpBeLiberal",
    get("conntrack.tcpBeLiberal") === true,
  );
  add(
    sinkOptions,
    "--conntrack-udp-timeout",
    "conntrack.udpTimeout",
    positiveDuration("conntrack.udpTimeout", str("conntrack.udpTimeout")),
  );
  add(
    sinkOptions,
    "--conntrack-udp-timeout-stream",
    "conntrack.udpStreamTimeout",
    positiveDuration("conntrack.udpStreamTimeout", str("conntrack.udpStreamTimeout")),
  );

  // Process settings.
  const oom = get("oomScoreAdj");
  if (typeof oom === "number" && (oom < -1000 || oom > 1000)) {
    throw new UsageError(`oomScoreAdj: ${oom} is outside [-1000, 1000]`);
  }
  const format = str("logging.format");
  if (format !== "" && format !== "text" && format !== "json") {
    throw new UsageError(`logging.format: unknown format "${format}" (text or json)`);
  }
  // "text" is kube-proxy's default, so nearly every file says it: kpng logs JSON lines regardless
  // (docs/kube-proxy-compat.md says so), and a warning on every start would only be noise.
  const verbosity = typeof get("logging.verbosity") === "number" ? (get("logging.verbosity") as number) : 0;
  positiveDuration("configSyncPeriod", str("configSyncPeriod"));

  // Fields that do nothing here, said out loud.
  const gates = get("featureGates");
  for (const gate of Object.keys((gates as Record<string, boolean> | undefined) ?? {})) {
    warnings.push(
      `featureGates.${gate}: kpng has no feature gates; its behaviour is that of the GA features`,
    );
  }
  if (str("portRange") !== "")
    warnings.push("portRange: ignored (kube-proxy ignores it too since the userspace mode went)");
  for (const [path, value] of values) {
    if (isZero(value) || INACTIVE_DEFAULTS[path] === value) continue;
    const inactive =
      path.startsWith(`${otherSection}.`) ||
      path.startsWith("ipvs.") ||
      path.startsWith("winkernel.") ||
      path === "windowsRunAsService";
    if (inactive) warnings.push(`${path}: applies to another proxy mode than ${mode}; ignored`);
  }

  return {
    mode,
    source: { name: "kube", options: source },
    sink: { name: sink, options: sinkOptions },
    oomScoreAdj: typeof oom === "number" ? oom : KUBE_PROXY_DEFAULTS.oomScoreAdj,
    logLevel: verbosity >= 6 ? "trace" : verbosity >= 3 ? "debug" : "info",
    warnings,
  };
}

/** "", false, 0, "0s", [] and {} are what kubeadm writes for "not set". */
function isZero(value: unknown): boolean {
  if (value === undefined || value === null || value === "" || value === false || value === 0) return true;
  if (typeof value === "string") {
    try {
      return parseDuration(value) === 0;
    } catch {
      return false;
    }
  }
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === "object") return Object.keys(value).length === 0;
  return false;
}

/** The duration text if it is more than zero, "" if zero or unset. */
function positiveDuration(field: string, text: string): string {
  if (text === "") return "";
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch (err) {
    throw new UsageError(`${field}: ${(err as Error).message}`);
  }
  return ms > 0 ? text : "";
}

/** Checks "host:port" (kube-proxy's form for the bind addresses); "" stays unset. */
function hostPort(field: string, text: string): string {
  if (text === "") return "";
  const address = splitHostPort(text);
  if (address === undefined || familyOfAddress(address.host) === undefined) {
    throw new UsageError(`${field}: "${text}" is not IP:port (e.g. 0.0.0.0:10256 or [::]:10256)`);
  }
  return text;
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
 * kube-proxy's nodePortAddresses as the backend's --nodeport-addresses. Unset means "primary" in
 * nftables mode and every local address in iptables mode (the backend's own default).
 */
function nodePortAddresses(mode: ProxyMode, value: unknown): string | undefined {
  const items = Array.isArray(value) ? (value as string[]).map((s) => s.trim()).filter((s) => s !== "") : [];
  if (items.length === 0) return mode === "nftables" ? "primary" : undefined;
  if (items.includes("primary")) {
    if (items.length > 1) {
      throw new UsageError(
        `nodePortAddresses: "primary" together with CIDRs is not supported; give either "primary" or CIDRs`,
      );
    }
    return "primary";
  }
  const cidrs = cidrList("nodePortAddresses", items);
  if (mode === "nftables" && cidrs.some((c) => c.startsWith("127.") || c === "::1/128")) {
    throw new UsageError("nodePortAddresses: localhost NodePorts are not supported in nftables mode");
  }
  return cidrs.join(",");
}
