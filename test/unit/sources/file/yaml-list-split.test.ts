import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parse } from "yaml";
import { parseClusterFile } from "../../../../src/sources/file/parse.ts";
import { splitListDocument } from "../../../../src/sources/file/yaml-list-split.ts";

/** A `kind: List` of `count` Nodes as kubectl writes it; node `bad` has no name. */
function kubectlList(count: number, bad = -1): string {
  const items = [];
  for (let i = 0; i < count; i++) {
    items.push(
      i === bad
        ? "- apiVersion: v1\n  kind: Node\n  metadata:\n    labels:\n      x: y\n"
        : `- apiVersion: v1\n  kind: Node\n  metadata:\n    annotations:\n      note: |\n        line one\n        - not an item\n    name: node-${i}\n`,
    );
  }
  return `apiVersion: v1\nitems:\n${items.join("")}kind: List\nmetadata:\n  resourceVersion: ""\n`;
}

describe("splitListDocument", () => {
  test("cuts a kubectl list into runs of items and the rest", () => {
    const text = kubectlList(600);
    const split = splitListDocument(text);
    assert.ok(split);
    assert.equal(split.parts.length, 3);
    assert.equal(split.skeleton, 'apiVersion: v1\nitems:\nkind: List\nmetadata:\n  resourceVersion: ""\n');
    assert.equal(
      split.parts.map((p) => p.text).join(""),
      text.slice(split.itemsStart, text.indexOf("kind: List")),
    );
    for (const part of split.parts) assert.ok(text.startsWith(part.text, part.start));
  });

  const notOurs: [string, string][] = [
    ["a list indented under its key", "kind: List\nitems:\n  - kind: Node\n  - kind: Node\n"],
    ["no items key", "kind: Node\nmetadata: {}\n"],
    ["a flow list", "kind: List\nitems: [{kind: Node}, {kind: Node}]\n"],
    ["a single item", "kind: List\nitems:\n- kind: Node\n"],
  ];
  for (const [name, text] of notOurs)
    test(`leaves ${name} whole`, () => assert.equal(splitListDocument(text), undefined));
});

describe("parseClusterFile: a kubectl list read in parts", () => {
  test("reads the same objects as one parse, and names a bad item in a later part by its line", () => {
    const text = kubectlList(700, 600);
    const parsed = parseClusterFile(text, "cluster.yaml");
    assert.ok(parsed.ok);
    const whole = parse(text) as { items: { metadata: { name?: string; annotations?: { note: string } } }[] };
    assert.deepEqual(
      parsed.contents.nodes.map((n) => n.metadata.name),
      whole.items.flatMap((i) => (i.metadata.name === undefined ? [] : [i.metadata.name])),
    );
    assert.equal(parsed.contents.nodes[0]?.metadata.annotations.note, "line one\n- not an item\n");
    const line =
      text.split("\n").findIndex((l, i, all) => l === "- apiVersion: v1" && all[i + 3] === "    labels:") + 1;
    assert.equal(parsed.contents.invalid.length, 1);
    assert.match(parsed.contents.invalid[0]?.reason ?? "", new RegExp(`\\(cluster\\.yaml:${line}\\)$`));
  });

  test("an alias to an anchor in another part is read by parsing the list whole", () => {
    const text = kubectlList(300)
      .replace("    name: node-0\n", "    name: node-0\n    labels: &shared\n      team: a\n")
      .replace("    name: node-299\n", "    name: node-299\n    labels: *shared\n");
    const parsed = parseClusterFile(text, "cluster.yaml");
    assert.ok(parsed.ok, parsed.ok ? "" : parsed.error);
    assert.equal(parsed.contents.nodes.length, 300);
    assert.deepEqual(parsed.contents.nodes[299]?.metadata.labels, { team: "a" });
  });

  test("a syntax error in a later part is placed by its line in the file", () => {
    const text = kubectlList(600).replace(
      "    name: node-500\n",
      "    name: node-500\n   bad: indentation\n",
    );
    const parsed = parseClusterFile(text, "cluster.yaml");
    assert.equal(parsed.ok, false);
    const line = text.split("\n").indexOf("   bad: indentation") + 1;
    if (!parsed.ok) {
      const m = /^cluster\.yaml:(\d+):\d+: YAML syntax error: /.exec(parsed.error);
      assert.ok(m, parsed.error);
      assert.ok(Math.abs(Number(m[1]) - line) <= 1, parsed.error);
    }
  });
});
