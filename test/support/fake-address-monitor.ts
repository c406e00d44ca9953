// An `ip monitor` (src/host/address-monitor.ts) that a test drives: it prints the lines the
// test says and ends when the test says; its first `failStarts` starts end at once, as an `ip`
// that cannot run.

import type { StartMonitor } from "../../src/host/address-monitor.ts";

export function fakeAddressMonitor(failStarts = 0) {
  const m = {
    starts: 0,
    running: false,
    say: (_line: string) => {},
    exit: (_why: string) => {},
    start: ((onLine, onExit) => {
      m.starts++;
      m.say = onLine;
      m.exit = (why) => {
        m.running = false;
        onExit(why);
      };
      if (m.starts <= failStarts) {
        queueMicrotask(() => m.exit("cannot start ip: ENOENT"));
        return { stop: () => {} };
      }
      m.running = true;
      return {
        stop: () => {
          m.running = false;
        },
      };
    }) as StartMonitor,
  };
  return m;
}
