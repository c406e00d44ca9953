import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  isNftError,
  markerCommand,
  scanForMarker,
} from "../../../../src/backends/nft/interactive-protocol.ts";
import { renderTransaction } from "../../../../src/backends/nft/transaction.ts";

describe("renderTransaction: one rendering for nft -f and nft -i", () => {
  test("the line holds the same statements as the text, in order", () => {
    const script = renderTransaction(
      [
        {
          phase: 1,
          ops: [
            {
              verb: "add",
              kind: "set",
              name: "a",
              declaration: {
                key: { types: ["ipv4_addr"] },
                flags: ["dynamic", "timeout"],
                timeoutSeconds: 10,
              },
            },
          ],
          elements: [],
        },
        {
          phase: 2,
          ops: [
            { verb: "add", kind: "chain", name: "c" },
            { verb: "add", kind: "rule", chain: "c", rule: "numgen random mod 2 0 dnat to 1.2.3.4:80" },
          ],
          elements: [],
        },
        {
          phase: 4,
          ops: [],
          elements: [
            { op: "delete", set: "m", key: "1.1.1.1 . tcp . 80", value: "" },
            { op: "add", set: "m", key: "1.1.1.1 . tcp . 80", value: "goto c" },
          ],
        },
      ],
      "ip",
      "kpng",
    );
    assert.equal(
      script.text,
      [
        "add set ip kpng a { type ipv4_addr; flags dynamic,timeout; timeout 10s; }",
        "add chain ip kpng c",
        "add rule ip kpng c numgen random mod 2 0 dnat to 1.2.3.4:80",
        "delete element ip kpng m { 1.1.1.1 . tcp . 80 }",
        "add element ip kpng m { 1.1.1.1 . tcp . 80 : goto c }",
        "",
      ].join("\n"),
    );
    assert.equal(script.line, script.text.trimEnd().split("\n").join("; "));
  });
});

describe("scanForMarker", () => {
  const m = markerCommand(7);
  const markerError = `Error: No such file or directory\n${m}\n              ^^^^^^^^^^^^^^^^^^^^^^\n`;
  const txError =
    "Error: Could not process rule: No such file or directory\nadd element ip t m { 1.2.3.4 : goto nosuch }\n                          ^^^^^^\n";

  test("only the marker's error means success with no output", () => {
    assert.deepEqual(scanForMarker(markerError, m), { done: true, output: "", rest: "" });
  });
  test("errors before the marker's error belong to the transaction", () => {
    const r = scanForMarker(txError + markerError, m);
    assert.equal(r.done, true);
    assert.ok(r.done && r.output === txError.trimEnd());
  });
  test("the marker is not complete until its caret line ends", () => {
    assert.deepEqual(scanForMarker(markerError.slice(0, -1), m), { done: false });
    assert.deepEqual(scanForMarker(`Error: No such file or directory\n${m}\n`, m), { done: false });
  });
  test("a hint in the marker's error text does not matter", () => {
    const hinted = `Error: No such file or directory; did you mean table 'kpng' in family ip?\n${m}\n   ^^^^\n`;
    assert.equal(scanForMarker(hinted, m).done, true);
  });
  test("the marker of another transaction is not this one's", () => {
    const other = markerError.replace(m, markerCommand(6));
    assert.deepEqual(scanForMarker(other, m), { done: false });
  });
  test("the marker echoed without an Error line before it does not count", () => {
    assert.deepEqual(scanForMarker(`${m}\n   ^^^\n`, m), { done: false });
  });
  test("what follows the marker is kept as the rest", () => {
    const r = scanForMarker(`${markerError}Error: late`, m);
    assert.ok(r.done && r.rest === "Error: late");
  });
});

describe("isNftError", () => {
  test("an Error line is a failure nft understood", () => assert.equal(isNftError("x\nError: y\n^"), true));
  test("anything else is not", () => assert.equal(isNftError("Warning: something"), false));
});
