import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseFallbackControllerOptions } from "../../../../src/controllers/fallback/plugin.ts";
import { UsageError } from "../../../../src/plugin/usage-error.ts";

describe("kpng fallback-controller options", () => {
  test("defaults: leader election on a Lease in $POD_NAMESPACE, 15s/10s/2s, status on 127.0.0.1:10260", () => {
    const o = parseFallbackControllerOptions({}, { POD_NAMESPACE: "kpng" });
    assert.equal(o.leaderElect, true);
    assert.equal(o.leaderElectNamespace, "kpng");
    assert.equal(o.leaderElectLeaseName, "kpng-fallback-controller");
    assert.deepEqual(
      [o.leaderElectLeaseDuration, o.leaderElectRenewDeadline, o.leaderElectRetryPeriod],
      [15_000, 10_000, 2_000],
    );
    assert.deepEqual(o.statusAddress, { host: "127.0.0.1", port: 10260 });
  });

  test("--no-leader-elect and an address on every interface", () => {
    const o = parseFallbackControllerOptions({ leaderElect: false, metricsAddress: "0.0.0.0:9000" }, {});
    assert.equal(o.leaderElect, false);
    assert.equal(o.leaderElectNamespace, "kube-system");
    assert.deepEqual(o.statusAddress, { host: "0.0.0.0", port: 9000 });
  });

  const bad: [string, Record<string, unknown>, RegExp][] = [
    [
      "a lease duration that is not a duration",
      { leaderElectLeaseDuration: "banana" },
      /--leader-elect-lease-duration/,
    ],
    [
      "a renew deadline not shorter than the lease",
      { leaderElectRenewDeadline: "20s" },
      /--leader-elect-renew-deadline/,
    ],
    [
      "a retry period not shorter than the renew deadline",
      { leaderElectRetryPeriod: "10s" },
      /--leader-elect-retry-period/,
    ],
    ["a zero retry period", { leaderElectRetryPeriod: "0" }, /--leader-elect-retry-period/],
    ["a metrics address without a port", { metricsAddress: "127.0.0.1" }, /--metrics-address/],
  ];
  for (const [name, raw, flag] of bad) {
    test(`${name}: a usage error naming the flag`, () => {
      assert.throws(
        () => parseFallbackControllerOptions(raw, {}),
        (err: unknown) => err instanceof UsageError && flag.test(err.message),
      );
    });
  }
});
