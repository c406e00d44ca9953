// The node services' flags, shared by every kernel backend's sink: declared once here, parsed up
// front into a typed object (a bad value is a UsageError naming the flag: exit 2 before
// anything starts).

import type { Command } from "commander";
import type { RawOptions as Options } from "../plugin/contracts.ts";
import { parseDuration } from "../plugin/duration.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { type BindAddress, parseBindAddress } from "./bind-address.ts";
import { CONNTRACK_SYSCTL_DEFAULTS, type ConntrackSysctlOptions } from "./conntrack/sysctls.ts";

export interface NodeServicesFlags {
  /** undefined: the server is off. */
  readonly healthz: BindAddress | undefined;
  readonly metrics: BindAddress | undefined;
  readonly conntrackCleanup: boolean;
  readonly conntrack: ConntrackSysctlOptions;
  /** Remove what kube-proxy left in the kernel before programming anything. */
  readonly cleanupKubeProxy: boolean;
  /** A server port in use is fatal; otherwise it is retried every 5 s. */
  readonly bindAddressHardFail: boolean;
  /** Serve the runtime's profiles on the metrics port. */
  readonly profiling: boolean;
}

export function addNodeServicesOptions(cmd: Command): void {
  const d = CONNTRACK_SYSCTL_DEFAULTS;
  cmd
    .option("--healthz-bind-address <host:port>", '/healthz and /livez; "" turns them off', "0.0.0.0:10256")
    .option(
      "--metrics-bind-address <host:port>",
      '/metrics and /proxyMode; "" turns them off',
      "127.0.0.1:10249",
    )
    .option("--no-conntrack-cleanup", "do not remove stale UDP/SCTP conntrack entries after syncs")
    .option(
      "--cleanup-kube-proxy",
      "at start, remove what kube-proxy left in the kernel (its iptables chains, nft tables, IPVS services)",
      false,
    )
    .option(
      "--conntrack-max-per-core <n>",
      "nf_conntrack_max per CPU (0: leave the limit alone)",
      String(d.maxPerCore),
    )
    .option("--conntrack-min <n>", "lower bound of nf_conntrack_max", String(d.min))
    .option("--conntrack-tcp-timeout-established <duration>", "0 leaves it alone", "24h")
    .option("--conntrack-tcp-timeout-close-wait <duration>", "0 leaves it alone", "1h")
    .option("--conntrack-tcp-be-liberal", "set nf_conntrack_tcp_be_liberal to 1", false)
    .option("--conntrack-udp-timeout <duration>", "nf_conntrack_udp_timeout (0 leaves it alone)", "0s")
    .option(
      "--conntrack-udp-timeout-stream <duration>",
      "nf_conntrack_udp_timeout_stream (0 leaves it alone)",
      "0s",
    )
    .option(
      "--bind-address-hard-fail",
      "exit when a server's port is in use (default: log and retry every 5 s, proxying goes on)",
      false,
    )
    .option(
      "--profiling",
      "serve heap and CPU profiles on the metrics port (/debug/pprof/heap, /debug/pprof/profile)",
      false,
    );
}

function text(raw: Options, key: string, fallback: string): string {
  const v = raw[key];
  return typeof v === "string" ? v : fallback;
}

function count(raw: Options, key: string, flag: string, fallback: number): number {
  const v = raw[key];
  if (v === undefined) return fallback;
  const n = typeof v === "number" ? v : /^\d+$/.test(String(v).trim()) ? Number(v) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 0)
    throw new UsageError(`${flag}: "${String(v)}" is not a whole number ≥ 0`);
  return n;
}

function seconds(raw: Options, key: string, flag: string, fallbackSeconds: number): number {
  const v = raw[key];
  if (v === undefined) return fallbackSeconds;
  try {
    return Math.round(parseDuration(String(v)) / 1000);
  } catch (err) {
    throw new UsageError(`${flag}: ${(err as Error).message}`);
  }
}

/** Throws UsageError naming the flag when a value is wrong. */
export function parseNodeServicesOptions(raw: Options): NodeServicesFlags {
  const d = CONNTRACK_SYSCTL_DEFAULTS;
  return {
    healthz: parseBindAddress(text(raw, "healthzBindAddress", "0.0.0.0:10256"), "--healthz-bind-address"),
    metrics: parseBindAddress(text(raw, "metricsBindAddress", "127.0.0.1:10249"), "--metrics-bind-address"),
    conntrackCleanup: raw.conntrackCleanup !== false,
    cleanupKubeProxy: raw.cleanupKubeProxy === true,
    bindAddressHardFail: raw.bindAddressHardFail === true,
    profiling: raw.profiling === true,
    conntrack: {
      tcpBeLiberal: raw.conntrackTcpBeLiberal === true,
      udpSeconds: seconds(raw, "conntrackUdpTimeout", "--conntrack-udp-timeout", 0),
      udpStreamSeconds: seconds(raw, "conntrackUdpTimeoutStream", "--conntrack-udp-timeout-stream", 0),
      maxPerCore: count(raw, "conntrackMaxPerCore", "--conntrack-max-per-core", d.maxPerCore),
      min: count(raw, "conntrackMin", "--conntrack-min", d.min),
      tcpEstablishedSeconds: seconds(
        raw,
        "conntrackTcpTimeoutEstablished",
        "--conntrack-tcp-timeout-established",
        d.tcpEstablishedSeconds,
      ),
      tcpCloseWaitSeconds: seconds(
        raw,
        "conntrackTcpTimeoutCloseWait",
        "--conntrack-tcp-timeout-close-wait",
        d.tcpCloseWaitSeconds,
      ),
    },
  };
}
