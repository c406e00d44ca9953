// `… to-local to-ebpf`: socket-level Service balancing from BPF maps for everything the node
// originates, plus the nft backend's rules, driven by the same process, for what the cgroup hooks
// cannot see (traffic arriving from other machines) and for the drops the programs pass on.
// `kpng cleanup ebpf` removes both.

import { fileURLToPath } from "node:url";
import { z } from "zod";
import type { CompanionBackend } from "../../backend-core/companion.ts";
import { withFirstState } from "../../backend-core/first-state.ts";
import { followNode } from "../../backend-core/node-watch.ts";
import { SyncLoop } from "../../backend-core/sync-loop.ts";
import { healthCheckAddresses } from "../../host/listen-addresses.ts";
import { nodePortAddresses } from "../../host/node-port-addresses.ts";
import { sharedSmallSpawner } from "../../host/small-spawner.ts";
import type { LocalState } from "../../model/local.ts";
import { NodeServices } from "../../node/node-services.ts";
import type { SyncObserver } from "../../node/sync-observer.ts";
import type { LocalSinkPlugin, RawOptions } from "../../plugin/contracts.ts";
import { parseOptionsWith } from "../../plugin/options.ts";
import { UsageError } from "../../plugin/usage-error.ts";
import { EbpfBackend } from "./backend.ts";
import { defaultCgroupRoot, startupProblems } from "./checks.ts";
import { BACKENDS_PER_CHUNK } from "./layout.ts";
import { openPinnedMaps } from "./list.ts";
import { PinnedMaps } from "./maps.ts";
import { EbpfProbe } from "./probe.ts";
import { BpftoolLoader, type LoaderSettings } from "./programs.ts";
import { NO_NODE_PORTS, type RenderContext, renderService } from "./render.ts";
import { EbpfRulesReader } from "./rules-reader.ts";
import { PinnedUdpDestroyer, UDP_DESTROY_BINARIES, UdpSocketDestroyer } from "./udp-destroy.ts";

const DEFAULT_OBJECT = fileURLToPath(new URL("../../../build/kpng.bpf.o", import.meta.url));

const count = (min: number, max: number) =>
  z.coerce.number().int("a whole number").min(min, `at least ${min}`).max(max, `at most ${max}`);

/**
 * The backend map's default size, in entries of up to BACKENDS_PER_CHUNK endpoints: 100k Services
 * of 10 endpoints take two each, and a Service switching lists holds both for a moment.
 */
export const DEFAULT_BACKEND_ENTRIES = 524_288;

const ebpfOptions = z.object({
  bpfRoot: z.string().min(1, "a bpffs directory").default("/sys/fs/bpf"),
  cgroupRoot: z.string().min(1, "a cgroup v2 directory").optional(),
  bpfObject: z.string().min(1).default(DEFAULT_OBJECT),
  bpfMapServices: count(1024, 16_777_216).default(262_144),
  bpfMapBackends: count(256, 8_388_608).default(DEFAULT_BACKEND_ENTRIES),
  localhostNodeports: z.boolean().optional().default(true),
});

interface EbpfOptions<O> {
  readonly loader: LoaderSettings;
  /** IPv4 NodePorts on 127.0.0.1 for the node's own sockets (kube-proxy's iptables.localhostNodePorts). */
  readonly localhostNodePorts: boolean;
  /** The companion's options (nft: node addresses, node services, sync period). */
  readonly companion: O;
}

/** How often pins and attachments are checked: the probe repairs within this and one sync. */
const REPAIR_CHECK_MS = 1000;

function parseLoaderOptions(raw: RawOptions): LoaderSettings {
  const o = parseOptionsWith(ebpfOptions, raw);
  return {
    bpfRoot: o.bpfRoot,
    cgroupRoot: o.cgroupRoot ?? defaultCgroupRoot(),
    object: o.bpfObject,
    serviceEntries: o.bpfMapServices,
    backendEntries: o.bpfMapBackends,
    affinityEntries: 65_536,
    reverseEntries: 262_144,
  };
}

/**
 * The to-ebpf sink. `external` serves what the cgroup programs cannot see (traffic from other
 * machines) and what they pass on unchanged (drops, source ranges, SCTP): the nft backend.
 */
export function ebpfPlugin<O>(external: CompanionBackend<O>): LocalSinkPlugin<EbpfOptions<O>> {
  return {
    name: "to-ebpf",
    description: "balance the node's own connections to services in BPF (cgroup hooks); nft for the rest",
    defaultMinSyncPeriod: "1s",
    binaries: [...external.binaries, "bpftool", ...UDP_DESTROY_BINARIES],
    addOptions(cmd) {
      external.addOptions(cmd);
      cmd
        .option("--bpf-root <dir>", "the bpffs mount; kpng pins under <dir>/kpng/", "/sys/fs/bpf")
        .option("--cgroup-root <dir>", "the cgroup v2 tree whose sockets are balanced (default: the host's)")
        .option("--bpf-object <file>", "the compiled programs (npm run build:bpf)", DEFAULT_OBJECT)
        .option(
          "--no-localhost-nodeports",
          "do not balance the node's connections to 127.0.0.1:<nodePort> (served by default where --nodeport-addresses holds 127.0.0.1, as kube-proxy's iptables mode)",
        )
        .option("--bpf-map-services <n>", "entries of the frontend map (address, port, protocol)", "262144")
        .option(
          "--bpf-map-backends <n>",
          `entries of the backend map, each up to ${BACKENDS_PER_CHUNK} endpoints of one list (twice the entries in use)`,
          String(DEFAULT_BACKEND_ENTRIES),
        );
    },
    owns: (opts) => [
      ...external.owns(opts.companion),
      { what: `the BPF pins under ${opts.loader.bpfRoot}/kpng`, fix: "give one of them another --bpf-root" },
      {
        what: `the programs attached to the cgroup ${opts.loader.cgroupRoot}`,
        fix: "give one of them another --cgroup-root",
      },
    ],
    parseOptions: (raw) => ({
      loader: parseLoaderOptions(raw),
      localhostNodePorts: parseOptionsWith(ebpfOptions, raw).localhostNodeports,
      companion: external.parseOptions(raw),
    }),
    async run(feed, opts, ctx) {
      const log = ctx.log.child({ component: "ebpf" });
      const settings = external.settings(opts.companion);
      if (settings.dryRun) {
        await withFirstState(feed, ctx.signal, async (state) => {
          for (const [key, svc] of state.services) {
            const groups = renderService(svc, NO_NODE_PORTS).map((g) => ({
              ...g,
              backends: g.backends.map(({ ip, port }) => ({ ip, port })),
            }));
            process.stdout.write(`${JSON.stringify({ service: key, groups })}\n`);
          }
        });
        return;
      }
      // Before anything is attached (exit 2); not in parseOptions, so that `kpng cleanup all`
      // parses every backend's defaults on any host.
      const problems = startupProblems(opts.loader);
      if (problems.length > 0) throw new UsageError(`to-ebpf cannot run here:\n  ${problems.join("\n  ")}`);
      // Forked now, while kpng is small: it starts bpftool for the loader and the probe.
      const spawner = sharedSmallSpawner();
      const loader = new BpftoolLoader(opts.loader, { spawner });
      const ebpf = new EbpfBackend({
        loader,
        openMaps: () => new PinnedMaps(opts.loader.bpfRoot),
        render: NO_NODE_PORTS,
        log,
        udpSockets: new UdpSocketDestroyer(
          new PinnedUdpDestroyer(opts.loader.bpfRoot, opts.loader.cgroupRoot, log, spawner),
          log,
        ),
      });
      // bpftool loads and attaches while the companion reads the node's addresses and the source
      // its first state (a file parsed for seconds at 100k Services). It only puts back what is
      // missing, so a second kpng that the companion's table lock then stops changes nothing.
      ebpf.prepare();
      const nft = await external.prepare(opts.companion, ctx, "ebpf");
      const render = renderContext(nft.current(), opts.localhostNodePorts);
      ebpf.reconfigure(render);
      log.info({ ...opts.loader, nodePortIPs: render.nodePortIPs }, "starting");
      if (opts.loader.cgroupRoot !== defaultCgroupRoot())
        // The companion leaves the node's own TCP and UDP to the programs (docs/ebpf.md).
        log.warn(
          { cgroupRoot: opts.loader.cgroupRoot },
          "--cgroup-root is not the host's cgroup root: node processes outside it reach only SCTP Services and load-balancer IPs with source ranges (the nft rules); other TCP and UDP Service addresses are not translated for them",
        );
      let node: NodeServices | undefined;
      try {
        node = await NodeServices.start(settings.node, {
          mode: "ebpf",
          families: ["IPv4", "IPv6"],
          syncPeriodMs: settings.syncPeriodMs,
          healthCheckAddresses: healthCheckAddresses(nft.current().nodePortCIDRs, nft.current().hostIPs),
          log: ctx.log.child({ component: "node" }),
        });
        const [joint, toNft] = jointObservers(node, 2) as [SyncObserver, SyncObserver];
        const maps = untilFirstOutcome(joint, ctx.signal);
        const loop = new SyncLoop({
          backend: "ebpf",
          families: ebpf.asFamilies(),
          log,
          syncPeriodMs: settings.syncPeriodMs,
          observer: maps.observer,
          probe: new EbpfProbe(loader, log, { stale: (family) => ebpf.stale(family) }),
          probeIntervalMs: REPAIR_CHECK_MS,
        });
        const services = node;
        followNode(nft, {
          backend: "ebpf",
          log,
          derive: (a) => ({
            nodePortIPs: renderContext(a, opts.localhostNodePorts).nodePortIPs,
            healthCheckAddresses: healthCheckAddresses(a.nodePortCIDRs, a.hostIPs),
          }),
          apply(now, _, was) {
            if (JSON.stringify(now.nodePortIPs) !== JSON.stringify(was.nodePortIPs)) {
              ebpf.reconfigure({ nodePortIPs: now.nodePortIPs });
              loop.forceFullSync();
            }
            void services.healthCheckNodePorts.listenOn(now.healthCheckAddresses);
          },
        });
        await Promise.all([
          loop.run(feed, ctx.signal),
          maps.first.then(() => (ctx.signal.aborted ? undefined : nft.run(feed, ctx.signal, toNft))),
        ]);
      } finally {
        // Graceful stop: programs stay attached, maps and rules stay in place.
        await node?.close();
        await nft.close();
      }
    },
    async rulesReader(opts) {
      const nft = await external.inspect(opts.companion);
      return new EbpfRulesReader({
        openMaps: () => openPinnedMaps(opts.loader.bpfRoot),
        render: renderContext(nft, opts.localhostNodePorts),
        bpfRoot: opts.loader.bpfRoot,
        companion: nft.rules,
      });
    },
    async cleanup(opts, ctx) {
      const done = await new BpftoolLoader(opts.loader).remove();
      ctx.log.info({ done }, "removed kpng's BPF programs and pins");
      await external.cleanup(opts.companion, ctx);
    },
  };
}

/** What the renderer needs of the node: the addresses that serve NodePorts, per family. */
export function renderContext(
  nft: { readonly hostIPs: readonly string[]; readonly nodePortCIDRs: readonly string[] },
  localhostNodePorts: boolean,
): RenderContext {
  return { nodePortIPs: nodePortAddresses(nft.hostIPs, nft.nodePortCIDRs, localhostNodePorts) };
}

/**
 * One observer per backend feeding the same node services: a state counts as synced (health,
 * healthCheckNodePorts, conntrack) once every backend has synced it. A backend that keeps failing
 * (a full map) therefore turns /healthz unhealthy, as a failing nft table does.
 */
export function jointObservers(target: SyncObserver, n: number): SyncObserver[] {
  const revisions = Array.from({ length: n }, () => -1);
  let reported = -1;
  return revisions.map((_, i) => ({
    queued: (state: LocalState) => {
      if (i === 0) target.queued(state);
    },
    async synced(o) {
      revisions[i] = o.state.revision;
      const min = Math.min(...revisions);
      if (min > reported && o.state.revision === min) {
        reported = min;
        await target.synced(o);
      }
    },
    failed: () => target.failed(),
  }));
}

/**
 * `target` as an observer, and a promise settled at its first sync outcome (synced or failed) or
 * when `signal` aborts. The companion starts once the maps hold the first state: its first render
 * is seconds of work on the one thread at 100k Services and would otherwise delay the maps, which
 * are what connections from the node need.
 */
export function untilFirstOutcome(
  target: SyncObserver,
  signal: AbortSignal,
): { readonly observer: SyncObserver; readonly first: Promise<void> } {
  const { promise, resolve } = Promise.withResolvers<void>();
  if (signal.aborted) resolve();
  else signal.addEventListener("abort", () => resolve(), { once: true });
  return {
    first: promise,
    observer: {
      queued: (state) => target.queued(state),
      async synced(o) {
        resolve();
        await target.synced(o);
      },
      failed() {
        resolve();
        target.failed();
      },
    },
  };
}
