import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseBindAddress } from "../../../src/node/bind-address.ts";
import { parseNodeServicesOptions } from "../../../src/node/options.ts";
import { UsageError } from "../../../src/plugin/usage-error.ts";

describe("parseBindAddress", () => {
  for (const [text, want] of [
    ["0.0.0.0:10256", { host: "0.0.0.0", port: 10256 }],
    ["[::]:10256", { host: "::", port: 10256 }],
    ["127.0.0.1:0", { host: "127.0.0.1", port: 0 }],
    ["", undefined],
  ] as const) {
    test(JSON.stringify(text), () => assert.deepEqual(parseBindAddress(text), want));
  }
  for (const bad of ["10256", "localhost:10256", "0.0.0.0:70000", "::10256", "1.2.3.4:", "0.0.0.0:port"]) {
    test(`rejects ${JSON.stringify(bad)} naming the flag`, () =>
      assert.throws(
        () => parseNodeServicesOptions({ healthzBindAddress: bad }),
        (e: Error) => e instanceof UsageError && e.message.startsWith("--healthz-bind-address"),
      ));
  }
});

describe("parseNodeServicesOptions", () => {
  test("defaults are kube-proxy's", () => {
    assert.deepEqual(parseNodeServicesOptions({}), {
      healthz: { host: "0.0.0.0", port: 10256 },
      metrics: { host: "127.0.0.1", port: 10249 },
      conntrackCleanup: true,
      conntrack: {
        maxPerCore: 32768,
        min: 131072,
        tcpEstablishedSeconds: 86400,
        tcpCloseWaitSeconds: 3600,
        tcpBeLiberal: false,
        udpSeconds: 0,
        udpStreamSeconds: 0,
      },
      cleanupKubeProxy: false,
      bindAddressHardFail: false,
      profiling: false,
    });
  });

  test("values from the command line", () => {
    const o = parseNodeServicesOptions({
      metricsBindAddress: "",
      conntrackCleanup: false,
      conntrackMaxPerCore: "0",
      conntrackTcpTimeoutCloseWait: "30s",
    });
    assert.equal(o.metrics, undefined);
    assert.equal(o.conntrackCleanup, false);
    assert.equal(o.conntrack.maxPerCore, 0);
    assert.equal(o.conntrack.tcpCloseWaitSeconds, 30);
  });

  for (const [key, value, flag] of [
    ["metricsBindAddress", "nope", "--metrics-bind-address"],
    ["conntrackMin", "-1", "--conntrack-min"],
    ["conntrackTcpTimeoutEstablished", "forever", "--conntrack-tcp-timeout-established"],
  ] as const) {
    test(`bad ${flag} is a UsageError naming it`, () =>
      assert.throws(
        () => parseNodeServicesOptions({ [key]: value }),
        (e: Error) => e instanceof UsageError && e.message.includes(flag),
      ));
  }
});
