// kube-proxy's command-line flags, parsed as kube-proxy parses them (`--flag=value`,
// `--flag value`, a bare `--flag` for true) into the configuration fields they set. A flag given
// on the command line overrides the same field in the --config file.

import { UsageError } from "../plugin/usage-error.ts";
import { typeProblem } from "./config-file.ts";
import type { FieldType } from "./fields.ts";

interface FlagSpec {
  /** The configuration field the flag sets, or a name of its own for flags with no field. */
  readonly path: string;
  readonly type: FieldType;
}

const FLAG_ONLY = {
  config: "flag:config",
  cleanup: "flag:cleanup",
  master: "flag:master",
} as const;

/** kube-proxy flag (without dashes) → what it sets. */
export const KUBE_PROXY_FLAGS: Readonly<Record<string, FlagSpec>> = {
  config: { path: FLAG_ONLY.config, type: "string" },
  cleanup: { path: FLAG_ONLY.cleanup, type: "bool" },
  master: { path: FLAG_ONLY.master, type: "string" },
  kubeconfig: { path: "clientConnection.kubeconfig", type: "string" },
  "kube-api-content-type": { path: "clientConnection.contentType", type: "string" },
  "kube-api-qps": { path: "clientConnection.qps", type: "int" },
  "kube-api-burst": { path: "clientConnection.burst", type: "int" },
  "hostname-override": { path: "hostnameOverride", type: "string" },
  "bind-address": { path: "bindAddress", type: "string" },
  "healthz-bind-address": { path: "healthzBindAddress", type: "string" },
  "metrics-bind-address": { path: "metricsBindAddress", type: "string" },
  "bind-address-hard-fail": { path: "bindAddressHardFail", type: "bool" },
  profiling: { path: "enableProfiling", type: "bool" },
  "show-hidden-metrics-for-version": { path: "showHiddenMetricsForVersion", type: "string" },
  "proxy-mode": { path: "mode", type: "string" },
  "sync-period": { path: "syncPeriod", type: "duration" },
  "min-sync-period": { path: "minSyncPeriod", type: "duration" },
  // kube-proxy applies --masquerade-all to whichever mode runs.
  "masquerade-all": { path: "masqueradeAll", type: "bool" },
  "iptables-masquerade-bit": { path: "iptables.masqueradeBit", type: "int" },
  "iptables-sync-period": { path: "iptables.syncPeriod", type: "duration" },
  "iptables-min-sync-period": { path: "iptables.minSyncPeriod", type: "duration" },
  "iptables-localhost-nodeports": { path: "iptables.localhostNodePorts", type: "bool" },
  "ipvs-sync-period": { path: "ipvs.syncPeriod", type: "duration" },
  "ipvs-min-sync-period": { path: "ipvs.minSyncPeriod", type: "duration" },
  "ipvs-scheduler": { path: "ipvs.scheduler", type: "string" },
  "ipvs-exclude-cidrs": { path: "ipvs.excludeCIDRs", type: "stringList" },
  "ipvs-strict-arp": { path: "ipvs.strictARP", type: "bool" },
  "ipvs-tcp-timeout": { path: "ipvs.tcpTimeout", type: "duration" },
  "ipvs-tcpfin-timeout": { path: "ipvs.tcpFinTimeout", type: "duration" },
  "ipvs-udp-timeout": { path: "ipvs.udpTimeout", type: "duration" },
  "detect-local-mode": { path: "detectLocalMode", type: "string" },
  "pod-bridge-interface": { path: "detectLocal.bridgeInterface", type: "string" },
  "pod-interface-name-prefix": { path: "detectLocal.interfaceNamePrefix", type: "string" },
  "cluster-cidr": { path: "clusterCIDR", type: "string" },
  "nodeport-addresses": { path: "nodePortAddresses", type: "stringList" },
  "oom-score-adj": { path: "oomScoreAdj", type: "int" },
  "conntrack-max-per-core": { path: "conntrack.maxPerCore", type: "int" },
  "conntrack-min": { path: "conntrack.min", type: "int" },
  "conntrack-tcp-timeout-established": { path: "conntrack.tcpEstablishedTimeout", type: "duration" },
  "conntrack-tcp-timeout-close-wait": { path: "conntrack.tcpCloseWaitTimeout", type: "duration" },
  "conntrack-tcp-be-liberal": { path: "conntrack.tcpBeLiberal", type: "bool" },
  "conntrack-udp-timeout": { path: "conntrack.udpTimeout", type: "duration" },
  "conntrack-udp-timeout-stream": { path: "conntrack.udpStreamTimeout", type: "duration" },
  "config-sync-period": { path: "configSyncPeriod", type: "duration" },
  "feature-gates": { path: "featureGates", type: "boolMap" },
  v: { path: "logging.verbosity", type: "int" },
  "logging-format": { path: "logging.format", type: "string" },
};

export interface ParsedFlags {
  /** --config, if given. */
  readonly configFile: string | undefined;
  readonly cleanup: boolean;
  /** --master: the API server URL; kube-proxy has no field for it. */
  readonly master: string | undefined;
  /** Field path → value, for every other flag given. */
  readonly overrides: ReadonlyMap<string, unknown>;
}

export function parseKubeProxyFlags(argv: readonly string[]): ParsedFlags {
  const set = new Map<string, unknown>();
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] ?? "";
    const m = /^--?([a-z][a-z0-9-]*)(?:=(.*))?$/s.exec(word);
    if (m === null) throw new UsageError(`kube-proxy: unexpected argument ${JSON.stringify(word)}`);
    const name = m[1] ?? "";
    const spec = KUBE_PROXY_FLAGS[name];
    if (spec === undefined) throw new UsageError(`kube-proxy: unknown flag --${name}`);
    let text = m[2];
    if (text === undefined && spec.type !== "bool") {
      text = argv[++i];
      if (text === undefined) throw new UsageError(`kube-proxy: flag --${name} needs a value`);
    }
    set.set(spec.path, flagValue(name, spec.type, text));
  }
  const str = (key: string) => set.get(key) as string | undefined;
  const overrides = new Map([...set].filter(([k]) => !k.startsWith("flag:")));
  return {
    configFile: str(FLAG_ONLY.config),
    cleanup: set.get(FLAG_ONLY.cleanup) === true,
    master: str(FLAG_ONLY.master),
    overrides,
  };
}

/** The flag's text as the field's value, as pflag reads it. */
function flagValue(name: string, type: FieldType, text: string | undefined): unknown {
  let value: unknown;
  switch (type) {
    case "bool":
      value = text === undefined || text === "true" ? true : text === "false" ? false : text;
      break;
    case "int":
      value = /^-?\d+$/.test(text ?? "") ? Number(text) : text;
      break;
    case "stringList":
      value = (text ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
      break;
    case "boolMap": {
      const map: Record<string, unknown> = {};
      for (const pair of (text ?? "").split(",").filter((p) => p.trim() !== "")) {
        const [k, v] = pair.split("=");
        map[(k ?? "").trim()] = v?.trim() === "true" ? true : v?.trim() === "false" ? false : v;
      }
      value = map;
      break;
    }
    default:
      value = text;
  }
  const problem = typeProblem(type, value);
  if (problem !== undefined) throw new UsageError(`kube-proxy: flag --${name}: ${problem}`);
  return value;
}
