import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseListBody } from "../../../src/kube/list-body.ts";

const slice = (i: number) => ({
  metadata: { name: `s-${i}`, namespace: "default", labels: { "kubernetes.io/service-name": `svc-${i}` } },
  addressType: "IPv4",
  endpoints: [
    { addresses: [`10.0.0.${i}`], conditions: { ready: true }, targetRef: { kind: "Pod", name: `p-${i}` } },
  ],
  ports: [{ name: "http", port: 8080, protocol: "TCP" }],
});

/** What the reflector reads of a list: its metadata and items. */
const read = (value: { metadata?: unknown; items?: unknown }) => ({
  metadata: value.metadata,
  items: value.items,
});

describe("parseListBody: a list page item by item, the same as JSON.parse of the whole", () => {
  const items = Array.from({ length: 50 }, (_, i) => slice(i));
  const metadata = { resourceVersion: "1234", continue: "eyJydiI6MTIzNH0" };
  const rows: [string, string][] = [
    [
      "a page as the API server writes it",
      JSON.stringify({ kind: "EndpointSliceList", apiVersion: "discovery.k8s.io/v1", metadata, items }),
    ],
    [
      "the last page (no continue)",
      JSON.stringify({ kind: "ServiceList", metadata: { resourceVersion: "9" }, items }),
    ],
    ["an empty list", JSON.stringify({ kind: "NodeList", metadata: { resourceVersion: "9" }, items: [] })],
    ["one item", JSON.stringify({ kind: "NodeList", metadata, items: [slice(1)] })],
    ["pretty-printed", JSON.stringify({ kind: "EndpointSliceList", metadata, items }, null, 2)],
    ["metadata after the items", JSON.stringify({ items, metadata, kind: "EndpointSliceList" })],
    [
      "non-ASCII text",
      JSON.stringify({
        metadata,
        items: [slice(1), { metadata: { name: "é", annotations: { a: "日本" } } }, slice(3)],
      }),
    ],
    [
      "items holding objects that start like an item",
      JSON.stringify({
        metadata,
        items: [
          slice(1),
          { metadata: { name: "x" }, nested: [{ metadata: { name: "y" } }, { metadata: {} }] },
          slice(3),
        ],
      }),
    ],
    ["no items", JSON.stringify({ kind: "Status", metadata: {}, code: 500 })],
  ];
  for (const [page, text] of rows) {
    test(page, () => {
      assert.deepEqual(read(parseListBody(Buffer.from(text))), read(JSON.parse(text)));
    });
  }

  const broken: [string, string][] = [
    [
      "a broken item",
      JSON.stringify({ metadata, items }).replace('"addressType":"IPv4"', '"addressType" "IPv4"'),
    ],
    ["a body cut short", JSON.stringify({ metadata, items }).slice(0, 500)],
    ["not JSON at all", "<html>502 Bad Gateway</html>"],
  ];
  for (const [what, text] of broken) {
    test(`${what}: fails as JSON.parse fails`, () => {
      let expected: unknown;
      try {
        JSON.parse(text);
      } catch (err) {
        expected = err;
      }
      assert.ok(expected instanceof SyntaxError);
      assert.throws(() => parseListBody(Buffer.from(text)), {
        name: "SyntaxError",
        message: expected.message,
      });
    });
  }
});
