import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  isNftError,
  markerCommand,
  scanForMarker,
  toTransactionLine,
} from "../../../../src/backends/nft/interactive-protocol.ts";
import { renderTransaction } from "../../../../src/backends/nft/transaction.ts";

describe("toTransactionLine", () => {
  const rows: { name: string; text: string; want: string | undefined }[] = [
    {
      name: "statements are joined by '; ' in order",
      text: "flush chain ip kpng a\nadd rule ip kpng a drop\n",
      want: "flush chain ip kpng a; add rule ip kpng a drop",
    },
    {
      name: "one-line blocks stay as they are",
      text: "add set ip kpng s { type ipv4_addr; flags interval; }\nadd element ip kpng m { 1.2.3.4 : drop, 1.2.3.5 : goto x }\n",
      want: "add set ip kpng s { type ipv4_addr; flags interval; }; add element ip kpng m { 1.2.3.4 : drop, 1.2.3.5 : goto x }",
    },
    {
      name: "blank lines and surrounding spaces are dropped",
      text: "\n  delete chain ip kpng a  \n\n",
      want: "delete chain ip kpng a",
    },
    { name: "an empty transaction is an empty line", text: "\n", want: "" },
    {
      name: "a block spanning lines is refused",
      text: "add chain ip kpng a {\n  type nat hook output priority 0;\n}\n",
      want: undefined,
    },
    { name: "a stray closing brace is refused", text: "add rule ip kpng a } drop {\n", want: undefined },
    {
      name: "a comment is refused (it would swallow the rest of the line)",
      text: "add chain ip kpng a # x\n",
      want: undefined,
    },
    { name: "a quoted string is refused", text: 'add rule ip kpng a drop comment "x; y"\n', want: undefined },
    { name: "a listing is refused", text: "list table ip kpng\n", want: undefined },
    {
      name: "quit is refused (it would end the process)",
      text: "add chain ip kpng a\nquit\n",
      want: undefined,
    },
    { name: "include is refused", text: "include x\n", want: undefined },
  ];
  for (const r of rows) test(r.name, () => assert.equal(toTransactionLine(r.text), r.want));

  test("every statement the backend renders fits on one line", () => {
    const text = renderTransaction(
      [
        {
          phase: 1,
          lines: ["add set ip kpng a { type ipv4_addr; flags dynamic,timeout; timeout 10s; }"],
          elements: [],
        },
        {
          phase: 2,
          lines: ["add chain ip kpng c", "add rule ip kpng c numgen random mod 2 0 dnat to 1.2.3.4:80"],
          elements: [],
        },
        {
          phase: 4,
          lines: [],
          elements: [
            { op: "delete", set: "m", key: "1.1.1.1 . tcp . 80", value: "" },
            { op: "add", set: "m", key: "1.1.1.1 . tcp . 80", value: "goto c" },
          ],
        },
      ],
      "ip",
      "kpng",
    );
    assert.equal(toTransactionLine(text), text.trimEnd().split("\n").join("; "));
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
