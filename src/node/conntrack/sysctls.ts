// The conntrack sysctls kube-proxy sets: the table size (from a per-core figure with a floor)
// and the TCP established / close-wait timeouts. 0 leaves a value as it is. A file that cannot
// be written (read-only /proc/sys in a container, a non-initial network namespace) is logged and
// skipped: the proxy works without it.

import { readFile, writeFile } from "node:fs/promises";
import type { Logger } from "../../observability/log.ts";

export interface ConntrackSysctlOptions {
  /** nf_conntrack_max = max(perCore × CPUs, min); perCore 0 leaves it alone. */
  readonly maxPerCore: number;
  readonly min: number;
  /** Seconds; 0 leaves them alone. */
  readonly tcpEstablishedSeconds: number;
  readonly tcpCloseWaitSeconds: number;
  /** nf_conntrack_tcp_be_liberal = 1; false leaves it alone. */
  readonly tcpBeLiberal: boolean;
  /** UDP timeouts in seconds; 0 leaves them alone. */
  readonly udpSeconds: number;
  readonly udpStreamSeconds: number;
}

export const CONNTRACK_SYSCTL_DEFAULTS: ConntrackSysctlOptions = {
  maxPerCore: 32_768,
  min: 131_072,
  tcpEstablishedSeconds: 86_400,
  tcpCloseWaitSeconds: 3600,
  tcpBeLiberal: false,
  udpSeconds: 0,
  udpStreamSeconds: 0,
};

interface Sysctl {
  readonly name: string;
  readonly value: number;
}

/** The settings to apply, in order. */
export function conntrackSysctls(o: ConntrackSysctlOptions, cpus: number): Sysctl[] {
  const out: Sysctl[] = [];
  if (o.maxPerCore > 0)
    out.push({ name: "net/netfilter/nf_conntrack_max", value: Math.max(o.maxPerCore * cpus, o.min) });
  if (o.tcpEstablishedSeconds > 0) {
    out.push({ name: "net/netfilter/nf_conntrack_tcp_timeout_established", value: o.tcpEstablishedSeconds });
  }
  if (o.tcpCloseWaitSeconds > 0) {
    out.push({ name: "net/netfilter/nf_conntrack_tcp_timeout_close_wait", value: o.tcpCloseWaitSeconds });
  }
  if (o.tcpBeLiberal) out.push({ name: "net/netfilter/nf_conntrack_tcp_be_liberal", value: 1 });
  if (o.udpSeconds > 0) out.push({ name: "net/netfilter/nf_conntrack_udp_timeout", value: o.udpSeconds });
  if (o.udpStreamSeconds > 0)
    out.push({ name: "net/netfilter/nf_conntrack_udp_timeout_stream", value: o.udpStreamSeconds });
  return out;
}

export interface SysctlFiles {
  read(name: string): Promise<string>;
  write(name: string, value: string): Promise<void>;
}

export class ProcSysctlFiles implements SysctlFiles {
  readonly #root: string;
  constructor(root = "/proc/sys") {
    this.#root = root;
  }
  read(name: string): Promise<string> {
    return readFile(`${this.#root}/${name}`, "utf8");
  }
  write(name: string, value: string): Promise<void> {
    return writeFile(`${this.#root}/${name}`, value);
  }
}

/** Writes each setting whose value differs; never throws. Returns the names written. */
export async function applySysctls(
  settings: readonly Sysctl[],
  files: SysctlFiles,
  log: Logger,
): Promise<string[]> {
  const written: string[] = [];
  for (const s of settings) {
    try {
      const current = Number((await files.read(s.name)).trim());
      if (current === s.value) continue;
      await files.write(s.name, String(s.value));
      written.push(s.name);
      log.info({ sysctl: s.name, from: current, to: s.value }, "set conntrack sysctl");
    } catch (err) {
      log.warn(
        { sysctl: s.name, value: s.value, err: String(err) },
        "cannot set conntrack sysctl; leaving it",
      );
    }
  }
  return written;
}
