// Fault: the `ip monitor` that says when to re-read the node's addresses dies, cannot start,
// hangs (runs but says nothing) or prints garbage. Each time the addresses are still followed,
// the fault is logged and counted, and the monitor is restarted with a bounded backoff.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { AddressMonitor } from "../../src/host/address-monitor.ts";
import { type HostAddresses, HostAddressWatch } from "../../src/host/address-watch.ts";
import { registry } from "../../src/observability/metrics.ts";
import { fakeAddressMonitor } from "../support/fake-address-monitor.ts";
import { FakeClock } from "../support/fake-clock.ts";
import { capturingLogger } from "./support.ts";

const START: HostAddresses = { all: ["127.0.0.1", "198.51.100.2"], primary: ["198.51.100.2"] };
const ADDED: HostAddresses = { all: ["127.0.0.1", "198.51.100.2", "192.0.2.7"], primary: ["198.51.100.2"] };
const MOVED: HostAddresses = { all: ["127.0.0.1", "192.0.2.7"], primary: ["192.0.2.7"] };

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = m?.values.find((x) => Object.entries(labels).every(([k, l]) => x.labels[k] === l));
  return Number(v?.value ?? 0);
}
const restarts = (reason: string) => metric("kpng_host_address_monitor_restarts_total", { reason });
const unrecognized = () => metric("kpng_host_address_monitor_unrecognized_lines_total");

function setup(failStarts = 0) {
  const clock = new FakeClock();
  const { log, lines } = capturingLogger();
  const monitor = fakeAddressMonitor(failStarts);
  let now = START;
  let reads = 0;
  const read = async () => {
    reads++;
    return now;
  };
  const events = new AddressMonitor({ start: monitor.start, clock, log });
  const watch = new HostAddressWatch({ read, initial: START, clock, log, events }).start();
  return {
    clock,
    lines,
    monitor,
    watch,
    set: (a: HostAddresses) => {
      now = a;
    },
    reads: () => reads,
  };
}

describe("fault: the monitor of the node's addresses", () => {
  test("dies: logged, counted, restarted after a backoff, and a change made meanwhile is read", async () => {
    const { clock, lines, monitor, watch, set } = setup();
    await clock.advance(250);
    const before = await restarts("exited");
    monitor.exit("ip monitor ended (SIGKILL)");
    assert.equal(await restarts("exited"), before + 1);
    const warned = lines.find((l) => /monitor of the node's addresses stopped/.test(String(l.msg)));
    assert.match(String(warned?.reason), /SIGKILL/);
    set(ADDED);
    await clock.advance(1250);
    assert.equal(monitor.starts, 2, "restarted within the first backoff");
    assert.deepEqual(watch.current, ADDED, "the change made while it was down is read at restart");
    set(MOVED);
    monitor.say("[ADDR]Deleted 2: eth0    inet 198.51.100.2/24 scope global eth0");
    await clock.advance(250);
    assert.deepEqual(watch.current, MOVED, "the new monitor's events are followed");
    watch.stop();
  });

  test("cannot start: restarted with a growing backoff, bounded; the safety net still reads", async () => {
    const before = await restarts("exited");
    const { clock, monitor, watch, set, lines } = setup(8);
    set(ADDED);
    await clock.advance(60_000);
    assert.deepEqual(watch.current, ADDED, "the periodic re-read follows the addresses");
    const startsInFirstMinute = monitor.starts;
    assert.ok(startsInFirstMinute <= 7, `${startsInFirstMinute} starts in a minute: backoff`);
    await clock.advance(10 * 60_000);
    assert.equal(monitor.starts, 9, "started again until it runs");
    assert.equal(monitor.running, true);
    assert.equal(await restarts("exited"), before + 8);
    const warned = lines.filter((l) => /monitor of the node's addresses stopped/.test(String(l.msg)));
    assert.equal(warned.length, 8, "each failed start logged");
    assert.ok(
      warned.every((l) => Number(l.restartInMs) <= 60_000),
      "the backoff is bounded",
    );
    watch.stop();
    assert.equal(clock.pending, 0);
  });

  test("hangs (runs, says nothing): the safety-net read finds the change, logs, counts, restarts it", async () => {
    const { clock, lines, monitor, watch, set } = setup();
    await clock.advance(250);
    const before = await restarts("missed");
    set(ADDED);
    await clock.advance(59_750);
    assert.deepEqual(watch.current, ADDED, "seen within the safety-net period");
    assert.equal(await restarts("missed"), before + 1);
    assert.ok(lines.some((l) => /came without an event/.test(String(l.reason))));
    await clock.advance(1250);
    assert.equal(monitor.starts, 2, "a new monitor");
    watch.stop();
  });

  test("prints garbage: each line counted and re-read, logged at a decaying rate", async () => {
    const { clock, lines, monitor, watch, set, reads } = setup();
    await clock.advance(250);
    const before = await unrecognized();
    const readsBefore = reads();
    set(ADDED);
    monitor.say("\u0000garbage");
    await clock.advance(250);
    assert.deepEqual(watch.current, ADDED, "garbage asks for a read");
    assert.equal(reads(), readsBefore + 1);
    for (let i = 0; i < 100; i++) monitor.say(`garbage ${i}`);
    await clock.advance(250);
    assert.equal(await unrecognized(), before + 101);
    assert.equal(reads(), readsBefore + 2, "a flood of garbage makes one read per debounce");
    const logged = lines.filter((l) => /not an address or route event/.test(String(l.msg))).length;
    assert.ok(logged >= 1 && logged <= 8, `${logged} lines logged for 101`);
    watch.stop();
  });
});
