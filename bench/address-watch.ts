// The idle cost of following the node's addresses, two ways:
// - re-reads as the periodic safety net and each event do them (`ip -j addr show`, and the
//   default routes every 6th read), in CPU of kpng and of its `ip` children per read, and what
//   one every 5 s (the period before events) would make as a share of one core;
// - the watch as kpng runs it (a long-lived `ip monitor`, a read per event and every 60 s) over
//   an idle window: kpng's CPU and that of its children (reaped `ip` reads and the monitor).
// A process start costs the parent more CPU the larger its heap: --heap-mib=N keeps N MiB of
// live objects, as a kpng holding a large cluster does (about 1,000 at 100k Services).
//
//   node bench/address-watch.ts [--reads=N] [--idle-s=N] [--heap-mib=N] [--quick]
// --quick: 20 reads, a 5 s idle window.

import { pino } from "pino";
import { hostAddressReader, watchHostAddresses } from "../src/host/address-watch.ts";
import { IpCommandHost } from "../src/host/host-network.ts";
import { childrenCpuSeconds } from "./lib/child-cpu.ts";
import { flagValue, quick, table } from "./lib/table.ts";

const POLL_S = 5;
const READS = Number(flagValue("reads") ?? (quick ? 20 : 200));
const IDLE_S = Number(flagValue("idle-s") ?? (quick ? 5 : 90));
const HEAP_MIB = Number(flagValue("heap-mib") ?? 0);

// About 100 bytes per object: small objects, as the cluster's state is made of.
const ballast = Array.from({ length: (HEAP_MIB * 1024 * 1024) / 100 }, (_, i) => ({ i, s: `e${i}` }));

const host = new IpCommandHost();
const read = hostAddressReader(host);
await read();
const cpu0 = process.cpuUsage();
const children0 = childrenCpuSeconds();
const t0 = performance.now();
for (let i = 0; i < READS; i++) await read();
const wallMs = (performance.now() - t0) / READS;
const own = process.cpuUsage(cpu0);
const ownMs = (own.user + own.system) / 1000 / READS;
const childrenMs = ((childrenCpuSeconds() - children0) * 1000) / READS;
const share = (ms: number) => `${((ms / (POLL_S * 1000)) * 100).toFixed(3)} %`;

console.log(
  `heap: ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB used (${ballast.length} ballast objects)`,
);
console.log(
  table(
    ["per re-read", "kpng CPU (user+sys)", "ip CPU (user+sys)", "wall"],
    [[`${READS} reads`, `${ownMs.toFixed(2)} ms`, `${childrenMs.toFixed(2)} ms`, `${wallMs.toFixed(2)} ms`]],
  ),
);
console.log(
  table(
    [`a read every ${POLL_S} s`, "kpng, % of a core", "ip, % of a core"],
    [["idle cost", share(ownMs), share(childrenMs)]],
  ),
);

// The watch as kpng runs it: started, settled (its first event read), then idle.
const watch = await watchHostAddresses(host, pino({ level: "silent" }));
await new Promise((r) => setTimeout(r, 1000));
const idleCpu0 = process.cpuUsage();
const idleChildren0 = childrenCpuSeconds();
const idleT0 = performance.now();
await new Promise((r) => setTimeout(r, IDLE_S * 1000));
const idleWindowMs = performance.now() - idleT0;
const idleOwn = process.cpuUsage(idleCpu0);
const idleOwnMs = (idleOwn.user + idleOwn.system) / 1000;
const idleChildrenMs = (childrenCpuSeconds() - idleChildren0) * 1000;
watch.stop();
const pct = (ms: number) => `${((ms / idleWindowMs) * 100).toFixed(3)} %`;
console.log(
  table(
    [`ip monitor, idle ${IDLE_S} s`, "kpng, % of a core", "children (ip monitor, reads), % of a core"],
    [["idle cost", pct(idleOwnMs), pct(idleChildrenMs)]],
  ),
);
