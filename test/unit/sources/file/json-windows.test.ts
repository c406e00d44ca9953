import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, test } from "node:test";
import { EventLoopTurns } from "../../../../src/lib/event-loop-turns.ts";
import { jsonObjects } from "../../../../src/sources/file/json-objects.ts";
import {
  NotWindowable,
  type ReadAt,
  windowedJsonObjects,
} from "../../../../src/sources/file/json-windows.ts";
import { parseClusterFile, parseJsonListInWindows } from "../../../../src/sources/file/parse.ts";
import { contentDigest } from "../../../../src/sources/file/source.ts";

/** The file as a ReadAt that hands out at most `chunk` bytes per call, as a read may. */
function readerOf(bytes: Buffer, chunk = Number.MAX_SAFE_INTEGER): ReadAt {
  return (into, at, length, position) => {
    const n = Math.max(0, Math.min(length, chunk, bytes.length - position));
    bytes.copy(into, at, position, position + n);
    return n;
  };
}

/** Each item's raw object and where it is, read in windows of `windowBytes`. */
function windowed(text: string, windowBytes: number, chunk?: number) {
  const bytes = Buffer.from(text);
  const out = [];
  for (const o of windowedJsonObjects(readerOf(bytes, chunk), {
    fileName: "cluster.json",
    windowBytes,
    maxBytes: bytes.length,
  }))
    out.push({ raw: o.raw, where: o.where() });
  return out;
}

/** The same, read whole and item by item (jsonObjects). */
function whole(text: string) {
  return [...jsonObjects(Buffer.from(text), "cluster.json", { maxWholeBytes: 0 })].map((o) => ({
    raw: o.raw,
    where: o.where(),
  }));
}

const node = (name: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels: { zone: "zone-α" } },
  ...extra,
});
const items = (n: number) =>
  Array.from({ length: n }, (_, i) => node(`node-${i}`, { note: "x".repeat(i % 37) }));

// Layouts as kubectl, the API server and people write them.
const layouts: Record<string, string> = {
  "kubectl -o json (pretty, kind after the items)": JSON.stringify(
    { apiVersion: "v1", items: items(40), kind: "List", metadata: { resourceVersion: "" } },
    null,
    4,
  ),
  "the API server's compact list (kind first)": JSON.stringify({
    kind: "NodeList",
    apiVersion: "v1",
    metadata: { resourceVersion: "7" },
    items: items(40).map(({ kind: _, ...rest }) => rest),
  }),
  "one item per line, with a byte order mark": `\ufeff{"kind": "List", "items": [\n${items(40)
    .map((i) => JSON.stringify(i))
    .join(",\n")}\n]}\n`,
  "a list of one item": JSON.stringify({ kind: "List", items: items(1) }, null, 2),
  "an empty list": '{"kind": "List", "items": []}',
};

describe("windowedJsonObjects: a JSON List read a window at a time", () => {
  for (const [name, text] of Object.entries(layouts)) {
    test(`${name}: the same items and positions as read whole, in windows of any size`, () => {
      const expected = whole(text);
      for (const windowBytes of [16, 64, 333, 4096, 1 << 20]) {
        for (const chunk of [undefined, 7]) {
          assert.deepEqual(
            windowed(text, windowBytes, chunk),
            expected,
            `window ${windowBytes}, chunk ${chunk}`,
          );
        }
      }
    });
  }

  test("every byte goes to onBytes once, in order: the digest is the whole file's", async () => {
    const text = layouts["kubectl -o json (pretty, kind after the items)"] ?? "";
    const bytes = Buffer.from(text);
    const hash = createHash("sha256");
    const parsed = await parseJsonListInWindows(readerOf(bytes, 1000), {
      fileName: "cluster.json",
      windowBytes: 256,
      maxBytes: bytes.length,
      onBytes: (fresh) => hash.update(fresh),
    });
    assert.ok(parsed);
    assert.equal(hash.digest("base64"), contentDigest(bytes));
    const read = parseClusterFile(bytes, "cluster.json");
    assert.ok(read.ok);
    assert.deepEqual(parsed, read.contents);
  });

  test("an invalid item is skipped and named with its line, as when read whole", async () => {
    const list = items(30);
    list[17] = { apiVersion: "v1", kind: "Node", metadata: { labels: {} } } as never;
    const text = JSON.stringify({ apiVersion: "v1", items: list, kind: "List" }, null, 2);
    const bytes = Buffer.from(text);
    const parsed = await parseJsonListInWindows(readerOf(bytes), {
      fileName: "c.json",
      windowBytes: 200,
      maxBytes: 1e9,
    });
    const read = parseClusterFile(bytes, "c.json", "default", { maxWholeBytes: 0 });
    assert.ok(parsed && read.ok);
    assert.equal(parsed.nodes.length, 29);
    assert.deepEqual(parsed.invalid, read.contents.invalid);
    assert.match(parsed.invalid[0]?.reason ?? "", /c\.json:\d+, items\[17\]/);
  });
});

describe("parseJsonListInWindows: a long read shares the event loop", () => {
  /** A clock that moves 1 ms at every look: a slice of 5 ms ends every few objects. */
  const ticking = () => {
    let now = 0;
    return () => now++;
  };

  test("between objects, other work runs whenever the slice is used up", async () => {
    const bytes = Buffer.from(JSON.stringify({ kind: "List", items: items(200) }));
    let ticks = 0;
    let stillTicking = true;
    const tick = () => {
      ticks++;
      if (stillTicking) setImmediate(tick);
    };
    setImmediate(tick);
    const parsed = await parseJsonListInWindows(
      readerOf(bytes),
      { fileName: "c.json", windowBytes: 256, maxBytes: 1e9 },
      undefined,
      { turns: new EventLoopTurns(5, ticking()) },
    );
    stillTicking = false;
    assert.equal(parsed?.nodes.length, 200);
    assert.ok(ticks >= 20, `the other work ran ${ticks} times during the read`);
  });

  test("a stop ends the read at its next turn, with the signal's reason", async () => {
    const bytes = Buffer.from(JSON.stringify({ kind: "List", items: items(200) }));
    const stop = new AbortController();
    let read = 0;
    const reader: ReadAt = (into, at, length, position) => {
      read++;
      if (read === 3) stop.abort(new Error("stopping"));
      return readerOf(bytes)(into, at, length, position);
    };
    await assert.rejects(
      parseJsonListInWindows(reader, { fileName: "c.json", windowBytes: 256, maxBytes: 1e9 }, undefined, {
        turns: new EventLoopTurns(5, ticking()),
        signal: stop.signal,
      }),
      /stopping/,
    );
    assert.ok(read < 20, `the read stopped early (${read} reads of a file that takes more)`);
  });
});

describe("windowedJsonObjects: anything else is left to the whole read (NotWindowable)", () => {
  const cases: Record<string, string> = {
    YAML: "apiVersion: v1\nkind: List\nitems: []\n",
    "one object, not a list": JSON.stringify(node("a")),
    "an object whose kind is not a list": JSON.stringify({ kind: "Node", items: items(3) }),
    "a list without a kind": JSON.stringify({ items: items(3) }),
    "a typed list whose kind comes after items that have none": JSON.stringify({
      items: items(3).map(({ kind: _, ...rest }) => rest),
      kind: "NodeList",
    }),
    "a typed list whose kind is given again after its items, differently": JSON.stringify({
      kind: "NodeList",
      items: items(3).map(({ kind: _, ...rest }) => rest),
      kind2: "List",
    }).replace('"kind2"', '"kind"'),
    "a broken item": `{"kind": "List", "items": [${JSON.stringify(node("a"))}, {"kind": "Node",}, ${JSON.stringify(node("c"))}]}`,
    "items with no separator to search for (the second opens with no member name)":
      '{"kind": "List", "items": [{"kind": "Node"}, {}]}',
    "the separator inside an item (a wrong guess)":
      '{\n"kind": "List",\n"items": [\n{\n"kind": "Node", "metadata": {"name": "a"}\n},\n{\n"kind": "Node", "metadata": {"name": "b"}, "x": [\n{\n"y": 1\n},\n{\n"y": 2\n}\n]\n},\n{\n"kind": "Node", "metadata": {"name": "c"}\n}\n]\n}\n',
    "text after the object": `${JSON.stringify({ kind: "List", items: items(3) })} {}`,
    "a file that ends inside an item": JSON.stringify({ kind: "List", items: items(3) }).slice(0, -40),
    "items twice": '{"kind": "List", "items": [], "items": []}',
  };
  for (const [name, text] of Object.entries(cases)) {
    test(name, async () => {
      for (const windowBytes of [16, 1 << 20]) {
        assert.throws(() => windowed(text, windowBytes), NotWindowable, `window ${windowBytes}`);
        const bytes = Buffer.from(text);
        assert.equal(
          await parseJsonListInWindows(readerOf(bytes), { fileName: "c.json", windowBytes, maxBytes: 1e9 }),
          undefined,
        );
      }
    });
  }

  test("a file that grows past the size limit while it is read", async () => {
    const bytes = Buffer.from(JSON.stringify({ kind: "List", items: items(50) }));
    const read = () =>
      parseJsonListInWindows(readerOf(bytes), {
        fileName: "c.json",
        windowBytes: 64,
        maxBytes: bytes.length - 1,
      });
    assert.equal(await read(), undefined);
  });

  test("a window grows to hold an item larger than it", () => {
    const big = node("big", { blob: "b".repeat(10_000) });
    const text = JSON.stringify({ kind: "List", items: [node("a"), big, node("c")] });
    assert.deepEqual(
      windowed(text, 32).map((o) => o.raw),
      whole(text).map((o) => o.raw),
    );
  });
});
