import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DEFAULT_MAX_LINE_BYTES } from "../../../../src/kube/limits.ts";
import { UsageError } from "../../../../src/plugin/usage-error.ts";
import { kubeSourcePlugin } from "../../../../src/sources/kube/plugin.ts";

describe("kube source options: read limits", () => {
  test("defaults are generous; each limit is a flag", () => {
    const defaults = kubeSourcePlugin.parseOptions({});
    assert.equal(defaults.maxWatchLineBytes, DEFAULT_MAX_LINE_BYTES);
    assert.equal(defaults.listTimeout, 60_000);
    const set = kubeSourcePlugin.parseOptions({
      maxWatchLineBytes: "1048576",
      maxListBytes: "2097152",
      listTimeout: "2m",
    });
    assert.deepEqual([set.maxWatchLineBytes, set.maxListBytes, set.listTimeout], [1048576, 2097152, 120_000]);
  });

  const bad: [Record<string, unknown>, RegExp][] = [
    [{ maxWatchLineBytes: "lots" }, /--max-watch-line-bytes: "lots" is not a whole number of bytes/],
    [{ maxWatchLineBytes: "100" }, /--max-watch-line-bytes: .*at least 65536/],
    [{ maxListBytes: "-1" }, /--max-list-bytes/],
    [{ listTimeout: "0" }, /--list-timeout: "0" is too short/],
    [{ watchInactivityTimeout: "0" }, /--watch-inactivity-timeout: "0" is too short/],
  ];
  for (const [raw, message] of bad) {
    test(`refused: ${JSON.stringify(raw)}`, () => {
      assert.throws(
        () => kubeSourcePlugin.parseOptions(raw),
        (e) => e instanceof UsageError && message.test(e.message),
      );
    });
  }
});
