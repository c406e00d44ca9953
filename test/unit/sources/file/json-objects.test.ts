import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { jsonLayout } from "../../../../src/lib/json-layout.ts";
import { GuessedOutlineFailed, jsonObjects } from "../../../../src/sources/file/json-objects.ts";
import { UnreadableFile } from "../../../../src/sources/file/located.ts";
import { parseClusterFile } from "../../../../src/sources/file/parse.ts";

/** Read item by item, as files over MAX_WHOLE_JSON_BYTES are. */
const read = (text: string) => [...jsonObjects(Buffer.from(text), "cluster.json", { maxWholeBytes: 0 })];
/** Read with one JSON.parse, as smaller files are. */
const readWhole = (text: string) => [...jsonObjects(Buffer.from(text), "cluster.json")];

/** The message of the error reading `text` throws (read again exactly after a wrong guess, as parseClusterFile does). */
function failure(text: string): string {
  try {
    try {
      read(text);
    } catch (err) {
      if (!(err instanceof GuessedOutlineFailed)) throw err;
      [...jsonObjects(Buffer.from(text), "cluster.json", { maxWholeBytes: 0, exactOutline: true })];
    }
  } catch (err) {
    assert.ok(err instanceof UnreadableFile, String(err));
    return err.message;
  }
  assert.fail("expected the file to be unreadable");
}

// JSON lists are parsed item by item, with no second try as YAML when they are too large for one
// string; these are the messages such a file gets.
describe("jsonObjects: a JSON list read item by item", () => {
  test("items come out in order with the list's item kind, the rest of the list ignored", () => {
    const objects = read(
      '{"kind": "NodeList", "items": [{"metadata": {"name": "a"}}, {"kind": "Node"}], "x": 1}',
    );
    assert.deepEqual(
      objects.map((o) => o.raw),
      [{ kind: "Node", metadata: { name: "a" } }, { kind: "Node" }],
    );
  });

  test("a file that is one object is that object", () => {
    for (const objects of [
      read('\ufeff{"kind": "Node", "metadata": {"name": "a"}}'),
      readWhole('\ufeff{"kind": "Node", "metadata": {"name": "a"}}'),
    ]) {
      assert.deepEqual(
        objects.map((o) => o.raw),
        [{ kind: "Node", metadata: { name: "a" } }],
      );
      assert.equal(objects[0]?.where(), "cluster.json:1");
    }
  });

  test("each item says its line and index, read whole or item by item", () => {
    const text = '{\n "kind": "List",\n "items": [\n  {"kind": "Node"},\n\n  {"kind": "Node"}\n ]\n}\n';
    for (const objects of [read(text), readWhole(text)]) {
      assert.deepEqual(
        objects.map((o) => o.where()),
        ["cluster.json:4, items[0]", "cluster.json:6, items[1]"],
      );
    }
  });

  test("read whole, a syntax error is placed by line and column too", () => {
    assert.throws(
      () =>
        readWhole('{"kind": "List", "items": [\n {"kind": "Node"},\n {"kind": "Node" "metadata": {}}\n]}'),
      /: cluster\.json:3:18: JSON syntax error: Expected ',' or '}' after property value/,
    );
  });

  test("non-ASCII text reads the same either way", () => {
    const text = JSON.stringify({
      kind: "List",
      items: [{ kind: "Node", metadata: { name: "n", annotations: { note: "café ☕" } } }],
    });
    assert.deepEqual(
      read(text).map((o) => o.raw),
      readWhole(text).map((o) => o.raw),
    );
    assert.equal(
      (read(text)[0]!.raw as { metadata: { annotations: { note: string } } }).metadata.annotations.note,
      "café ☕",
    );
  });

  const broken: [string, string, RegExp][] = [
    [
      "a bad item in the middle, placed by line and column",
      '{"kind": "List", "items": [\n {"kind": "Node"},\n {"kind": "Node" "metadata": {}}\n]}',
      /^cluster\.json:3:18: JSON syntax error: Expected ',' or '}' after property value/,
    ],
    [
      "an item cut short",
      '{"kind": "List", "items": [\n {"kind": "Node"},\n {"kind": "No',
      /^cluster\.json:3:2: JSON syntax error: unterminated object/,
    ],
    [
      "a string cut short",
      '{"kind": "List", "items": [],\n "note": "abc',
      /^cluster\.json:2:10: JSON syntax error: unterminated string/,
    ],
    [
      "an array cut short",
      '{"kind": "List", "items": [\n {"kind": "Node"},\n {"kind": 1',
      /^cluster\.json:3:2: JSON syntax error: unterminated object/,
    ],
    [
      "a missing comma between items",
      '{"kind": "List", "items": [{}\n{}]}',
      /^cluster\.json:2:1: JSON syntax error: expected ',' or ']'/,
    ],
    [
      "text after the object",
      '{"kind": "List", "items": []}\n{}',
      /^cluster\.json:2:1: JSON syntax error: unexpected text after the object/,
    ],
    [
      "a member name without quotes",
      '{kind: "List"}',
      /^cluster\.json:1:2: JSON syntax error: expected a member name/,
    ],
  ];
  for (const [name, text, want] of broken) test(name, () => assert.match(failure(text), want));

  test("strings may hold brackets, quotes and escaped backslashes", () => {
    const tricky = { kind: "Node", metadata: { name: "n", annotations: { a: 'x"]}[{\\', b: '\\\\"' } } };
    const objects = read(JSON.stringify({ kind: "List", items: [tricky, { kind: "Node" }] }));
    assert.deepEqual(
      objects.map((o) => o.raw),
      [tricky, { kind: "Node" }],
    );
  });
});

describe("jsonObjects: the items of a pretty-printed list found by their separator", () => {
  const node = (name: string, extra: Record<string, unknown> = {}) => ({
    kind: "Node",
    metadata: { name },
    ...extra,
  });
  const pretty = (value: unknown) => JSON.stringify(value, null, 4);
  const names = (text: string) => {
    const parsed = parseClusterFile(text, "cluster.json", "default", { maxWholeBytes: 0 });
    assert.ok(parsed.ok, parsed.ok ? "" : parsed.error);
    return parsed.contents.nodes.map((n) => n.metadata.name);
  };

  test("kubectl's layout is outlined by the separator, to the same items as an exact outline", () => {
    const text = pretty({ apiVersion: "v1", items: [1, 2, 3, 4, 5].map((i) => node(`n${i}`)), kind: "List" });
    const bytes = Buffer.from(text);
    const guessed = jsonLayout(bytes);
    const exact = jsonLayout(bytes, true);
    assert.ok(guessed.ok && exact.ok);
    assert.equal(guessed.layout.guessed, true);
    assert.equal(exact.layout.guessed, false);
    assert.deepEqual(guessed.layout.items, exact.layout.items);
    assert.deepEqual(names(text), ["n1", "n2", "n3", "n4", "n5"]);
  });

  // Items whose own lists are printed at the items' indentation, as no JSON printer does but a
  // hand-made file may: the separator is found inside an item.
  const sameIndentInside =
    '{\n"kind": "List",\n"items": [\n{\n"kind": "Node", "metadata": {"name": "a"}\n},\n{\n"kind": "Node", "metadata": {"name": "b"}, "x": [\n{\n"y": 1\n},\n{\n"y": 2\n}\n]\n},\n{\n"kind": "Node", "metadata": {"name": "c"}\n}\n]\n}\n';

  test("a wrong guess shows as an item that does not parse; read again exactly, the file is good", () => {
    assert.throws(() => read(sameIndentInside), GuessedOutlineFailed);
    assert.deepEqual(names(sameIndentInside), ["a", "b", "c"]);
  });

  test("the separator found after the list is a wrong guess too", () => {
    const text =
      '{\n"items": [\n{\n"kind": "Node", "metadata": {"name": "a"}\n},\n{\n"kind": "Node", "metadata": {"name": "b"}\n}\n],\n"kind": "List",\n"other": [\n{\n"y": 1\n},\n{\n"y": 2\n}\n]\n}\n';
    assert.deepEqual(names(text), ["a", "b"]);
  });

  test("a broken item of a guessed list is still reported at its line", () => {
    const text = pretty({ kind: "List", items: [node("a"), node("b"), node("c")] }).replace(
      '"name": "b"',
      '"name" "b"',
    );
    const parsed = parseClusterFile(text, "cluster.json", "default", { maxWholeBytes: 0 });
    assert.equal(parsed.ok, false);
    const line = text.split("\n").findIndex((l) => l.includes('"name" "b"')) + 1;
    if (!parsed.ok) assert.match(parsed.error, new RegExp(`^cluster\\.json:${line}:\\d+: `));
  });
});

describe("jsonObjects: which lists are read item by item by default", () => {
  /** A list of `count` Nodes of about 100 bytes each, its last item broken. */
  const brokenAtEnd = (count: number) => {
    const good = Array.from(
      { length: count - 1 },
      (_, i) => `{"metadata": {"name": "node-${i}"}, "x": "${"-".repeat(60)}"}`,
    );
    return `{"kind": "NodeList", "items": [${[...good, '{"metadata": {"name": "bad",}}'].join(", ")}]}`;
  };

  test("a list over a mebibyte: items are handed on one by one, before a later one is parsed", () => {
    const text = brokenAtEnd(15_000);
    assert.ok(text.length > 2 ** 20);
    const objects = jsonObjects(Buffer.from(text), "cluster.json");
    assert.deepEqual(objects.next().value?.raw, {
      kind: "Node",
      metadata: { name: "node-0" },
      x: "-".repeat(60),
    });
  });

  test("a small list is parsed whole: the broken item is found before the first is handed on", () => {
    const objects = jsonObjects(Buffer.from(brokenAtEnd(100)), "cluster.json");
    assert.throws(() => objects.next(), UnreadableFile);
  });
});
