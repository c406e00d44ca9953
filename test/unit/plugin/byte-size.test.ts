import assert from "node:assert/strict";
import { test } from "node:test";
import { parseByteSize } from "../../../src/plugin/byte-size.ts";

test("sizes are bytes or Ki, Mi, Gi", () => {
  assert.equal(parseByteSize("1048576"), 1048576);
  assert.equal(parseByteSize("512Ki"), 512 * 1024);
  assert.equal(parseByteSize("64Mi"), 64 * 1024 ** 2);
  assert.equal(parseByteSize("2Gi"), 2 * 1024 ** 3);
  for (const bad of ["", "0", "1.5Mi", "1MB", "-1", "9999999999999999999"])
    assert.throws(() => parseByteSize(bad), /is not a size/, bad);
});
