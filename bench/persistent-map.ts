// The services map of a local state: the hand-written persistent map (src/model/persistent-map.ts)
// against what it replaced, a plain Map copied per revision. Per size: building the first state's
// map, one revision that sets one key, a lookup, and iterating every entry, in µs of CPU.
//
//   node --expose-gc bench/persistent-map.ts [--sizes=10000,100000] [--quick]

import { PersistentMap } from "../src/model/persistent-map.ts";
import { sizesFlag, table } from "./lib/table.ts";

const cpuUs = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** CPU µs per call of `f`, the median of `rounds` timings of `batch` calls. */
function time(rounds: number, batch: number, f: (i: number) => void): number {
  const samples: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t = cpuUs();
    for (let i = 0; i < batch; i++) f(r * batch + i);
    samples.push((cpuUs() - t) / batch);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)] ?? 0;
}

const rows: string[][] = [];
for (const n of sizesFlag([10_000, 100_000])) {
  const keys = Array.from({ length: n }, (_, i) => `ns-${i % 50}/svc-${i}`);
  const value = { v: 1 };
  let pm = PersistentMap.empty<object>();
  let map = new Map<string, object>();
  const buildP = time(5, 1, () => {
    const e = PersistentMap.empty<object>().edit();
    for (const k of keys) e.set(k, value);
    pm = e.done();
  });
  const buildM = time(5, 1, () => {
    map = new Map();
    for (const k of keys) map.set(k, value);
  });
  const setP = time(9, 200, (i) => {
    pm.set(keys[i % n] as string, { v: i });
  });
  const setM = time(9, 2, (i) => {
    const copy = new Map(map);
    copy.set(keys[i % n] as string, { v: i });
  });
  const getP = time(9, 10_000, (i) => pm.get(keys[i % n] as string));
  const getM = time(9, 10_000, (i) => map.get(keys[i % n] as string));
  let sink = 0;
  const iterP = time(5, 1, () => {
    for (const v of pm.values()) if (v === value) sink++;
  });
  const iterM = time(5, 1, () => {
    for (const v of map.values()) if (v === value) sink++;
  });
  if (sink < 0) console.log(sink);
  rows.push(
    [String(n), "persistent", buildP.toFixed(0), setP.toFixed(1), getP.toFixed(3), iterP.toFixed(0)],
    [String(n), "Map, copied", buildM.toFixed(0), setM.toFixed(1), getM.toFixed(3), iterM.toFixed(0)],
  );
}
console.log("\nservices map: CPU µs (median)\n");
console.log(table(["services", "map", "build all", "one revision", "get", "iterate all"], rows));
