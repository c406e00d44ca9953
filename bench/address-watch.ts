// The idle cost of following the node's addresses: re-reads as kpng does them every 5 s
// (`ip -j addr show`, and the default routes every 6th read), in CPU of kpng and of its `ip`
// children per read, and what that makes as a share of one core.
//
//   node bench/address-watch.ts [--reads=N] [--quick]
// --quick: 20 reads.

import { hostAddressReader } from "../src/host/address-watch.ts";
import { IpCommandHost } from "../src/host/host-network.ts";
import { childrenCpuSeconds } from "./lib/child-cpu.ts";
import { quick, table } from "./lib/table.ts";

const POLL_S = 5;
const readsArg = process.argv.find((a) => a.startsWith("--reads="));
const READS = readsArg ? Number(readsArg.slice("--reads=".length)) : quick ? 20 : 200;

const read = hostAddressReader(new IpCommandHost());
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
  table(
    ["per re-read", "kpng CPU (user+sys)", "ip CPU (user+sys)", "wall"],
    [[`${READS} reads`, `${ownMs.toFixed(2)} ms`, `${childrenMs.toFixed(2)} ms`, `${wallMs.toFixed(2)} ms`]],
  ),
);
console.log(
  table(
    [`every ${POLL_S} s`, "kpng, % of a core", "ip, % of a core"],
    [["idle cost", share(ownMs), share(childrenMs)]],
  ),
);
