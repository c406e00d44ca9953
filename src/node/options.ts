// The node services' flags, shared by every kernel backend's sink: declared once here, parsed up
// front into a typed object (a bad value is a UsageError naming the flag: exit 2 before
// anything starts).

import type { Command } from "commander";
import { z } from "zod";
import type { RawOptions as Options } from "../plugin/contracts.ts";
import { durationFlag, parsedBy, parseOptionsWith, switchFlag, wholeNumberFlag } from "../plugin/options.ts";
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

/** A timeout flag in whole seconds (a duration such as "1h" or "90s"; 0 leaves the sysctl alone). */
const seconds = (fallbackSeconds: number) =>
  durationFlag(0, "")
    .optional()
    .default(fallbackSeconds * 1000)
    .transform((ms) => Math.round(ms / 1000));

/** A server address: "host:port", or "" for off. */
const bindAddress = (fallback: string) =>
  z.string().optional().default(fallback).transform(parsedBy(parseBindAddress));

const nodeServicesFlags = z
  .object({
    healthzBindAddress: bindAddress("0.0.0.0:10256"),
    metricsBindAddress: bindAddress("127.0.0.1:10249"),
    conntrackCleanup: z.boolean().optional().default(true),
    cleanupKubeProxy: switchFlag,
    bindAddressHardFail: switchFlag,
    profiling: switchFlag,
    conntrackTcpBeLiberal: switchFlag,
    conntrackUdpTimeout: seconds(0),
    conntrackUdpTimeoutStream: seconds(0),
    conntrackMaxPerCore: wholeNumberFlag(CONNTRACK_SYSCTL_DEFAULTS.maxPerCore),
    conntrackMin: wholeNumberFlag(CONNTRACK_SYSCTL_DEFAULTS.min),
    conntrackTcpTimeoutEstablished: seconds(CONNTRACK_SYSCTL_DEFAULTS.tcpEstablishedSeconds),
    conntrackTcpTimeoutCloseWait: seconds(CONNTRACK_SYSCTL_DEFAULTS.tcpCloseWaitSeconds),
  })
  .transform(
    (f): NodeServicesFlags => ({
      healthz: f.healthzBindAddress,
      metrics: f.metricsBindAddress,
      conntrackCleanup: f.conntrackCleanup,
      cleanupKubeProxy: f.cleanupKubeProxy,
      bindAddressHardFail: f.bindAddressHardFail,
      profiling: f.profiling,
      conntrack: {
        tcpBeLiberal: f.conntrackTcpBeLiberal,
        udpSeconds: f.conntrackUdpTimeout,
        udpStreamSeconds: f.conntrackUdpTimeoutStream,
        maxPerCore: f.conntrackMaxPerCore,
        min: f.conntrackMin,
        tcpEstablishedSeconds: f.conntrackTcpTimeoutEstablished,
        tcpCloseWaitSeconds: f.conntrackTcpTimeoutCloseWait,
      },
    }),
  );

/** Throws UsageError naming the flag when a value is wrong. */
export function parseNodeServicesOptions(raw: Options): NodeServicesFlags {
  return parseOptionsWith(nodeServicesFlags, raw);
}
