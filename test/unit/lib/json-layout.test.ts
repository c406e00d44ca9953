import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { jsonLayout } from "../../../src/lib/json-layout.ts";

const service = (name: string) => ({
  metadata: { name, namespace: "default", labels: { app: name } },
  spec: { ports: [{ port: 80 }, { port: 443 }], clusterIP: "192.0.2.1" },
});

/** Guessed and exact outlines of `text`: both must succeed. */
function outlines(text: string) {
  const bytes = Buffer.from(text);
  const guessed = jsonLayout(bytes);
  const exact = jsonLayout(bytes, true);
  assert.ok(guessed.ok && exact.ok);
  const pieces = (items: readonly (readonly [number, number])[] | undefined) =>
    (items ?? []).map(([s, e]) => bytes.toString("utf8", s, e));
  return { guessed: guessed.layout, exact: exact.layout, pieces };
}

describe("jsonLayout: a list's items found by the separator between them", () => {
  const items = ["a", "b", "c", "d"].map(service);
  const rows: [string, string][] = [
    ["compact JSON, as the API server writes a list", JSON.stringify({ kind: "ServiceList", items })],
    ["one item per line", `{"kind":"List","items":[\n${items.map((i) => JSON.stringify(i)).join(",\n")}\n]}`],
    ["pretty-printed, as kubectl writes", JSON.stringify({ kind: "List", items }, null, 4)],
  ];
  for (const [layout, text] of rows) {
    test(`${layout}: guessed, to the same items as an exact outline`, () => {
      const { guessed, exact, pieces } = outlines(text);
      assert.equal(guessed.guessed, true);
      assert.deepEqual(guessed.items, exact.items);
      assert.deepEqual(
        pieces(guessed.items).map((p) => JSON.parse(p)),
        items,
      );
    });
  }

  test("the list's kind and metadata are read, before or after the items", () => {
    const metadata = { resourceVersion: "42", continue: "abc" };
    for (const text of [
      JSON.stringify({ kind: "ServiceList", metadata, items }),
      JSON.stringify({ items, kind: "ServiceList", metadata }),
    ]) {
      const { guessed } = outlines(text);
      assert.equal(guessed.kind, "ServiceList");
      assert.deepEqual(guessed.metadata, metadata);
    }
  });

  test("an item holding objects that start like an item: the guess cuts it, and the pieces show it", () => {
    const nested = {
      metadata: { name: "x" },
      subsets: [{ metadata: { name: "y" } }, { metadata: { name: "z" } }],
    };
    const text = JSON.stringify({ kind: "List", items: [service("a"), nested, service("c")] });
    const { guessed, exact, pieces } = outlines(text);
    assert.equal(guessed.guessed, true);
    assert.notDeepEqual(guessed.items, exact.items);
    assert.throws(() => pieces(guessed.items).map((p) => JSON.parse(p)), SyntaxError);
    assert.deepEqual(
      pieces(exact.items).map((p) => JSON.parse(p)),
      [service("a"), nested, service("c")],
    );
  });

  test("separators inside strings are not separators", () => {
    const tricky = { metadata: { name: 'q},{"metadata":', annotations: { a: '"},{"metadata":{' } } };
    const list = [service("a"), tricky, service("c")];
    const { guessed, exact, pieces } = outlines(JSON.stringify({ kind: "List", items: list }));
    assert.deepEqual(guessed.items, exact.items);
    assert.deepEqual(
      pieces(guessed.items).map((p) => JSON.parse(p)),
      list,
    );
  });
});
