// The node's addresses are re-read when `ip monitor` says they may have changed: an address
// event or a default route's, debounced, never for another route; with nothing happening no
// read at all but the slow safety-net one. The monitor process is supervised (see
// test/faults/address-monitor-failures.test.ts for its faults).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { pino } from "pino";
import { AddressMonitor, monitorLineKind } from "../../../src/host/address-monitor.ts";
import { type HostAddresses, HostAddressWatch } from "../../../src/host/address-watch.ts";
import { fakeAddressMonitor } from "../../support/fake-address-monitor.ts";
import { FakeClock } from "../../support/fake-clock.ts";

const START: HostAddresses = { all: ["127.0.0.1", "198.51.100.2"], primary: ["198.51.100.2"] };
const ADDED: HostAddresses = { all: ["127.0.0.1", "198.51.100.2", "192.0.2.7"], primary: ["198.51.100.2"] };

describe("what a line of ip monitor is about", () => {
  const rows: [string, string, ReturnType<typeof monitorLineKind>][] = [
    [
      "an address added",
      "[ADDR]3: d0    inet 192.0.2.5/24 scope global d0\\       valid_lft forever",
      "address",
    ],
    ["an address removed", "[ADDR]Deleted 3: d0    inet 192.0.2.5/24 scope global d0", "address"],
    ["a default route added", "[ROUTE]default via 192.0.2.1 dev d0 ", "default-route"],
    ["a default route removed", "[ROUTE]Deleted default via 192.0.2.1 dev d0 ", "default-route"],
    ["an IPv6 default route", "[ROUTE]default via fe80::1 dev d0 proto ra metric 1024", "default-route"],
    ["a pod's route", "[ROUTE]10.244.1.7 dev cali12345 scope link ", "other-route"],
    ["a local route", "[ROUTE]local 192.0.2.5 dev d0 table local proto kernel scope host", "other-route"],
    ["a route named like a default one", "[ROUTE]defaultish 10.0.0.0/8 dev d0", "other-route"],
    ["no label", "3: d0    inet 192.0.2.5/24", "unrecognized"],
    ["garbage", "\u0000\u0001 garbage", "unrecognized"],
  ];
  for (const [name, line, kind] of rows)
    test(name, () => {
      assert.equal(monitorLineKind(line), kind);
    });
});

/** A read the test scripts, counting the reads and whether each asked for the routes. */
function scriptedRead(answer: () => HostAddresses) {
  const s = {
    reads: [] as boolean[],
    read: async (routes = false) => {
      s.reads.push(routes);
      return answer();
    },
  };
  return s;
}

function watched(answer: () => HostAddresses) {
  const clock = new FakeClock();
  const log = pino({ level: "silent" });
  const monitor = fakeAddressMonitor();
  const source = scriptedRead(answer);
  const events = new AddressMonitor({ start: monitor.start, clock, log });
  const watch = new HostAddressWatch({ read: source.read, initial: START, clock, log, events });
  const changes: HostAddresses[] = [];
  watch.subscribe((now) => changes.push(now));
  return { clock, monitor, source, watch: watch.start(), changes };
}

describe("reading the addresses when ip monitor says so", () => {
  test("idle: one read after the monitor starts, then only the 60 s safety net", async () => {
    const { clock, source, watch } = watched(() => START);
    await clock.advance(250);
    assert.equal(source.reads.length, 1, "a started monitor may have missed a change: one read");
    await clock.advance(59_000);
    assert.equal(source.reads.length, 1, "nothing happens, nothing is read");
    await clock.advance(1000);
    assert.deepEqual(source.reads, [true, false], "the safety-net read, without the routes");
    watch.stop();
  });

  test("an address event: read within the debounce, with the routes, and told", async () => {
    let now = START;
    const { clock, monitor, source, watch, changes } = watched(() => now);
    await clock.advance(250);
    now = ADDED;
    monitor.say("[ADDR]3: d0    inet 192.0.2.7/24 scope global d0");
    await clock.advance(249);
    assert.equal(source.reads.length, 1, "not before the debounce");
    await clock.advance(1);
    assert.deepEqual(source.reads, [true, true]);
    assert.deepEqual(changes, [ADDED]);
    watch.stop();
  });

  test("a burst of events makes one read; a pod's route makes none", async () => {
    const { clock, monitor, source, watch } = watched(() => START);
    await clock.advance(250);
    for (let i = 0; i < 20; i++) monitor.say(`[ADDR]${i}: veth${i}    inet6 fe80::${i}/64 scope link`);
    monitor.say("[ROUTE]Deleted default via 192.0.2.1 dev d0 ");
    await clock.advance(250);
    assert.equal(source.reads.length, 2, "21 events, one read");
    for (let i = 0; i < 50; i++) monitor.say(`[ROUTE]10.244.1.${i} dev cali${i} scope link `);
    await clock.advance(10_000);
    assert.equal(source.reads.length, 2, "routes other than the default ones ask for nothing");
    watch.stop();
  });

  test("an event during a read: another read follows it, with the routes; the change is no miss", async () => {
    let release = () => {};
    let calls = 0;
    const clock = new FakeClock();
    const log = pino({ level: "silent" });
    const monitor = fakeAddressMonitor();
    const reads: boolean[] = [];
    const read = (routes = false) => {
      reads.push(routes);
      calls++;
      if (calls !== 2) return Promise.resolve(calls < 2 ? START : ADDED);
      return new Promise<HostAddresses>((resolve) => {
        release = () => resolve(ADDED);
      });
    };
    const events = new AddressMonitor({ start: monitor.start, clock, log });
    const watch = new HostAddressWatch({ read, initial: START, clock, log, events }).start();
    await clock.advance(250);
    await clock.advance(59_750);
    assert.deepEqual(reads, [true, false], "the safety-net read is running");
    monitor.say("[ROUTE]default via 192.0.2.1 dev d0 ");
    await clock.advance(250);
    assert.equal(reads.length, 2, "no second read while one runs");
    release();
    await clock.advance(0);
    assert.deepEqual(reads, [true, false, true]);
    assert.deepEqual(watch.current, ADDED);
    await clock.advance(2000);
    assert.equal(monitor.starts, 1, "the change the periodic read found came with an event: not a miss");
    watch.stop();
  });

  test("stop ends the monitor and every timer", async () => {
    const { clock, monitor, source, watch } = watched(() => START);
    await clock.advance(250);
    watch.stop();
    assert.equal(monitor.running, false);
    monitor.say("[ADDR]late");
    await clock.advance(120_000);
    assert.equal(source.reads.length, 1);
    assert.equal(clock.pending, 0);
  });
});
