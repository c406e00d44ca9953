// The node's addresses are re-read every period with a deadline; a change is told to the
// listeners, a failed or hung read is logged and counted and the last good addresses stay.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type HostAddresses, HostAddressWatch, hostAddressReader } from "../../../src/host/address-watch.ts";
import type { HostNetwork } from "../../../src/host/host-network.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import { FakeClock } from "../../support/fake-clock.ts";

async function failures(reason: string): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find(
    (x) => x.name === "kpng_host_address_read_failures_total",
  );
  return Number(m?.values.find((v) => v.labels.reason === reason)?.value ?? 0);
}

const START: HostAddresses = { all: ["127.0.0.1", "198.51.100.2"], primary: ["198.51.100.2"] };
const ADDED: HostAddresses = { all: ["127.0.0.1", "198.51.100.2", "192.0.2.7"], primary: ["198.51.100.2"] };

/** An address source the test scripts: each read takes the next answer (an error, or never). */
function scriptedSource(answers: (HostAddresses | Error | "hang")[]) {
  let reads = 0;
  return {
    get reads() {
      return reads;
    },
    read: (): Promise<HostAddresses> => {
      const a = answers[Math.min(reads++, answers.length - 1)];
      if (a === "hang") return new Promise(() => {});
      return a instanceof Error ? Promise.reject(a) : Promise.resolve(a as HostAddresses);
    },
  };
}

function watchOf(source: ReturnType<typeof scriptedSource>) {
  const clock = new FakeClock();
  const { log, lines } = capturingLogger("info");
  const watch = new HostAddressWatch({ read: source.read, initial: START, clock, log, intervalMs: 5000 });
  const changes: [HostAddresses, HostAddresses][] = [];
  watch.subscribe((now, was) => changes.push([now, was]));
  return { clock, lines, watch: watch.start(), changes };
}

describe("following the node's addresses", () => {
  test("an added address is seen within one period, and told once", async () => {
    const source = scriptedSource([START, ADDED, ADDED]);
    const { clock, watch, changes } = watchOf(source);
    await clock.advance(4999);
    assert.equal(source.reads, 0, "nothing read before the period");
    await clock.advance(1);
    assert.deepEqual(changes, [], "the same addresses: nothing told");
    await clock.advance(5000);
    assert.deepEqual(changes, [[ADDED, START]]);
    assert.deepEqual(watch.current, ADDED);
    await clock.advance(5000);
    assert.equal(changes.length, 1, "no change, nothing told again");
    watch.stop();
    await clock.advance(60_000);
    assert.equal(source.reads, 3, "no read after stop");
    assert.equal(clock.pending, 0);
  });

  test("a primary address change alone is a change", async () => {
    const moved: HostAddresses = { all: START.all, primary: ["192.0.2.7"] };
    const { clock, watch, changes } = watchOf(scriptedSource([moved]));
    await clock.advance(5000);
    assert.deepEqual(changes, [[moved, START]]);
    watch.stop();
  });
});

describe("faults of the address source", () => {
  test("a failing read is logged and counted; the last good addresses stay; a later read recovers", async () => {
    const before = await failures("error");
    const source = scriptedSource([new Error("ip: cannot open netlink socket"), new Error("again"), ADDED]);
    const { clock, watch, changes, lines } = watchOf(source);
    await clock.advance(5000);
    assert.deepEqual(watch.current, START, "the last good addresses stay in use");
    assert.equal(await failures("error"), before + 1);
    assert.match(String(lines.at(-1)?.msg), /cannot re-read the node's addresses/);
    assert.match(String(lines.at(-1)?.err), /netlink/);
    await clock.advance(5000);
    assert.equal(await failures("error"), before + 2);
    await clock.advance(5000);
    assert.deepEqual(changes, [[ADDED, START]]);
    assert.match(String(lines.at(-1)?.msg), /can be read again/);
    watch.stop();
  });

  test("a read that hangs passes its deadline: counted, and the next period reads again", async () => {
    const before = await failures("timeout");
    const source = scriptedSource(["hang", ADDED]);
    const clock = new FakeClock();
    const { log, lines } = capturingLogger("info");
    const watch = new HostAddressWatch({
      read: source.read,
      initial: START,
      clock,
      log,
      intervalMs: 5000,
      timeoutMs: 2000,
    }).start();
    await clock.advance(5000);
    assert.equal(await failures("timeout"), before, "within its deadline: not yet a failure");
    await clock.advance(2000);
    assert.equal(await failures("timeout"), before + 1);
    assert.match(String(lines.at(-1)?.err), /no answer within 2000 ms/);
    assert.deepEqual(watch.current, START);
    await clock.advance(5000);
    assert.equal(source.reads, 2, "the hung read does not stop the next one");
    assert.deepEqual(watch.current, ADDED);
    watch.stop();
    assert.equal(clock.pending, 0, "no timer left behind");
  });

  test("a recurring failure is logged at a decaying rate, every one counted", async () => {
    const before = await failures("error");
    const { clock, watch, lines } = watchOf(scriptedSource([new Error("ip: EPERM")]));
    await clock.advance(5000 * 16);
    assert.equal(await failures("error"), before + 16);
    const logged = lines.filter((l) => /cannot re-read/.test(String(l.msg))).length;
    assert.ok(logged <= 5, `${logged} lines for 16 failures`);
    watch.stop();
  });
});

describe("reading the addresses", () => {
  /** A node whose interfaces and default routes the test changes; counts the route reads. */
  function scriptedHost() {
    const h: { routeReads: number; defaultIfs: string[]; eth1: string[]; host: HostNetwork } = {
      routeReads: 0,
      defaultIfs: ["eth0"],
      eth1: ["192.0.2.10"],
      host: {
        defaultRouteInterfaces: async () => {
          h.routeReads++;
          return h.defaultIfs;
        },
        interfaces: async () => [
          { ifname: "lo", addresses: [{ ip: "127.0.0.1", scope: "host" }] },
          { ifname: "eth0", addresses: [{ ip: "198.51.100.2", scope: "global" }] },
          { ifname: "eth1", addresses: h.eth1.map((ip) => ({ ip, scope: "global" })) },
        ],
      },
    };
    return h;
  }

  test("every address, and the default-route interface's as the primary", async () => {
    const h = scriptedHost();
    assert.deepEqual(await hostAddressReader(h.host)(), {
      all: ["127.0.0.1", "198.51.100.2", "192.0.2.10"],
      primary: ["198.51.100.2"],
    });
  });

  test("the routes are read again when the addresses change, and every 6th read otherwise", async () => {
    const h = scriptedHost();
    const read = hostAddressReader(h.host);
    await read();
    assert.equal(h.routeReads, 1);
    for (let i = 0; i < 5; i++) await read();
    assert.equal(h.routeReads, 1, "nothing changed: one command per read");
    h.defaultIfs = ["eth1"];
    assert.deepEqual((await read()).primary, ["192.0.2.10"], "the 6th read after the first: routes read");
    assert.equal(h.routeReads, 2);
    h.eth1 = ["192.0.2.10", "192.0.2.11"];
    assert.deepEqual((await read()).primary, ["192.0.2.10", "192.0.2.11"]);
    assert.equal(h.routeReads, 3, "an address changed: routes read at once");
  });
});
