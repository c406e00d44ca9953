import assert from "node:assert/strict";
import { test } from "node:test";
import { parseFdLimit } from "../../../src/host/fd-limit.ts";

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            1024                 1048576              files
`;

test("the open-file limit is read from /proc/<pid>/limits", () => {
  assert.deepEqual(parseFdLimit(LIMITS), { soft: 1024, hard: 1048576 });
  assert.deepEqual(parseFdLimit(LIMITS.replace("1048576", "unlimited")), {
    soft: 1024,
    hard: Number.POSITIVE_INFINITY,
  });
  assert.equal(parseFdLimit("Max cpu time unlimited unlimited seconds\n"), undefined);
});
