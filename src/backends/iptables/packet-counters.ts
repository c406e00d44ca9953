// kube-proxy's two packet metrics of iptables mode, read from the counters of the rules that do
// the work (kube-proxy uses nfacct objects; the rules' own counters need no extra module):
// - kubeproxy_iptables_ct_state_invalid_dropped_packets_total: packets dropped by KPNG-FORWARD's
//   INVALID rule;
// - kubeproxy_iptables_localhost_nodeports_accepted_packets_total: connections to a NodePort on
//   127.0.0.0/8 (nat sees the first packet of each), by the localhost rules of KPNG-NODEPORTS.
// A sync that rewrites a chain restarts its counters at 0, so the counters are read before every
// sync of the family and at every scrape, and only what they gained is added: what arrives
// between the last read and a rewrite is not counted. Each read has the runner's deadline.

import type { Logger } from "../../observability/log.ts";
import { counter } from "../../observability/metrics.ts";
import { LOCALHOST_V4, SHARED_CHAINS } from "./names.ts";
import { CT_INVALID_DROP } from "./ruleset.ts";
import type { IptablesRunner, Table } from "./runner.ts";

const samplers = new Set<() => Promise<void>>();

async function sampleAll(): Promise<void> {
  await Promise.all([...samplers].map((s) => s()));
}

const ctInvalidDropped = counter(
  "kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
  "Forwarded packets dropped because conntrack found them INVALID (IPv4).",
  [],
  sampleAll,
);
const localhostAccepted = counter(
  "kubeproxy_iptables_localhost_nodeports_accepted_packets_total",
  "Connections accepted on a NodePort at a 127.0.0.0/8 address (IPv4).",
  [],
  sampleAll,
);

interface Source {
  readonly table: Table;
  readonly chain: string;
  /** Whether a rule of the chain (`-A … -c packets bytes`, counters removed) counts. */
  readonly counts: (rule: string) => boolean;
  readonly metric: typeof ctInvalidDropped;
  last: number;
}

const COUNTERS = / -c (\d+) \d+/;

/** Sums the packets of the rules of an `iptables -S -v` listing that `counts` keeps. */
export function countedPackets(listing: string, counts: (rule: string) => boolean): number {
  let sum = 0;
  for (const line of listing.split("\n")) {
    const m = COUNTERS.exec(line);
    if (m && counts(line.replace(COUNTERS, ""))) sum += Number(m[1]);
  }
  return sum;
}

export class PacketCounters {
  readonly #runner: IptablesRunner;
  readonly #log: Logger;
  readonly #sources: Source[] = [];
  #reading: Promise<void> | undefined;

  constructor(
    runner: IptablesRunner,
    options: { readonly dropInvalid: boolean; readonly localhostNodePorts: boolean; readonly log: Logger },
  ) {
    this.#runner = runner;
    this.#log = options.log;
    // Both exist from the start, as kube-proxy's.
    ctInvalidDropped.inc(0);
    localhostAccepted.inc(0);
    if (options.dropInvalid)
      this.#sources.push({
        table: "filter",
        chain: SHARED_CHAINS.forward,
        counts: (rule) => rule === CT_INVALID_DROP,
        metric: ctInvalidDropped,
        last: 0,
      });
    if (options.localhostNodePorts)
      this.#sources.push({
        table: "nat",
        chain: SHARED_CHAINS.nodePorts,
        counts: (rule) => rule.startsWith(`-A ${SHARED_CHAINS.nodePorts} -d ${LOCALHOST_V4} `),
        metric: localhostAccepted,
        last: 0,
      });
  }

  /** Counts at every scrape until `stop()`. */
  start(): void {
    samplers.add(this.sample);
  }

  stop(): void {
    samplers.delete(this.sample);
  }

  /** Reads the counters once (reads already running are joined); never throws. */
  readonly sample = (): Promise<void> => {
    this.#reading ??= this.#read().finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  };

  async #read(): Promise<void> {
    for (const s of this.#sources) {
      let listing: string;
      try {
        // The runner's deadline (a few seconds) bounds the read.
        listing = await this.#runner.rulesWithCounters("IPv4", s.table, s.chain);
      } catch (err) {
        this.#log.debug({ chain: s.chain, err: String(err) }, "cannot read the rule counters");
        continue;
      }
      const now = countedPackets(listing, s.counts);
      // Lower than before: the chain was rewritten and counts from 0 again.
      s.metric.inc(now >= s.last ? now - s.last : now);
      s.last = now;
    }
  }
}
