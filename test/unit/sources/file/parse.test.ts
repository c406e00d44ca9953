import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type ClusterFileContents, parseClusterFile } from "../../../../src/sources/file/parse.ts";

const service = (name: string, namespace?: string, ip = "203.0.113.10") => `
apiVersion: v1
kind: Service
metadata:
  name: ${name}
${namespace === undefined ? "" : `  namespace: ${namespace}`}
spec:
  clusterIP: ${ip}
  clusterIPs: [${ip}]
  ports: [{ name: http, port: 80, targetPort: 8080 }]
`;

const node = (name: string) => `
apiVersion: v1
kind: Node
metadata: { name: ${name} }
`;

const slice = (name: string, serviceName: string) => `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ${name}
  labels: { kubernetes.io/service-name: ${serviceName} }
addressType: IPv4
ports: [{ name: http, port: 8080 }]
endpoints:
  - addresses: [198.51.100.2]
`;

function contents(text: string): ClusterFileContents {
  const parsed = parseClusterFile(text, "cluster.yaml");
  if (!parsed.ok) assert.fail(`expected a readable file, got: ${parsed.error}`);
  return parsed.contents;
}

const keys = (c: ClusterFileContents) => ({
  services: c.services.map((s) => `${s.metadata.namespace}/${s.metadata.name}`),
  endpointSlices: c.endpointSlices.map((s) => `${s.metadata.namespace}/${s.metadata.name}`),
  nodes: c.nodes.map((n) => n.metadata.name),
});

describe("parseClusterFile: what a readable file holds", () => {
  const cases: {
    name: string;
    text: string;
    want: { services: string[]; endpointSlices: string[]; nodes: string[] };
  }[] = [
    {
      name: "each YAML document is one object, sorted out by kind",
      text: [service("web", "shop"), slice("web-1", "web"), node("node-1")].join("---\n"),
      want: { services: ["shop/web"], endpointSlices: ["default/web-1"], nodes: ["node-1"] },
    },
    {
      name: "an object without a namespace is in default",
      text: service("web"),
      want: { services: ["default/web"], endpointSlices: [], nodes: [] },
    },
    {
      name: "a kind: List contributes each of its items",
      text: `apiVersion: v1\nkind: List\nitems:\n${[service("a"), node("n")]
        .map((t) => `  - ${t.trim().replaceAll("\n", "\n    ")}`)
        .join("\n")}\n`,
      want: { services: ["default/a"], endpointSlices: [], nodes: ["n"] },
    },
    {
      name: "a typed list (ServiceList) gives its items, which carry no kind, that kind",
      text: JSON.stringify({
        apiVersion: "v1",
        kind: "ServiceList",
        items: [{ metadata: { name: "a" }, spec: { clusterIP: "203.0.113.1", ports: [{ port: 80 }] } }],
      }),
      want: { services: ["default/a"], endpointSlices: [], nodes: [] },
    },
    {
      name: "JSON is read as YAML",
      text: JSON.stringify({ apiVersion: "v1", kind: "Node", metadata: { name: "json-node" } }),
      want: { services: [], endpointSlices: [], nodes: ["json-node"] },
    },
    {
      name: "empty documents and an empty file hold nothing",
      text: "---\n# only a comment\n---\n",
      want: { services: [], endpointSlices: [], nodes: [] },
    },
    {
      name: "an empty file holds nothing (an empty cluster, not an error)",
      text: "",
      want: { services: [], endpointSlices: [], nodes: [] },
    },
    {
      name: "an object defined twice counts once, the last definition winning",
      text: [service("web", undefined, "203.0.113.1"), service("web", undefined, "203.0.113.2")].join(
        "---\n",
      ),
      want: { services: ["default/web"], endpointSlices: [], nodes: [] },
    },
  ];
  for (const tc of cases) {
    test(tc.name, () => assert.deepEqual(keys(contents(tc.text)), tc.want));
  }

  test("the later of two definitions is the one kept", () => {
    const c = contents(
      [service("web", undefined, "203.0.113.1"), service("web", undefined, "203.0.113.2")].join("---\n"),
    );
    assert.equal(c.services[0]?.clusterIP, "203.0.113.2");
    assert.deepEqual(c.duplicates, ["Service default/web"]);
  });

  test("the definition that wins takes its place in the order; the keys follow the lists", () => {
    const c = contents(
      [
        service("a", undefined, "203.0.113.1"),
        node("a"),
        service("b"),
        service("a", undefined, "203.0.113.2"),
        node("n"),
        node("a"),
        slice("a", "a"),
      ].join("---\n"),
    );
    assert.deepEqual(keys(c), {
      services: ["default/b", "default/a"],
      endpointSlices: ["default/a"],
      nodes: ["n", "a"],
    });
    assert.equal(c.services[1]?.clusterIP, "203.0.113.2");
    assert.deepEqual(c.duplicates, ["Service default/a", "Node a"]);
    const byKey = Object.fromEntries(
      Object.entries(c.byKey).map(([kind, map]) => [
        kind,
        [...map.entries()].map(([k, o]) => [k, o.metadata.name]),
      ]),
    );
    // The maps the store may take on: each object under its key, in the order of the lists.
    assert.deepEqual(byKey, {
      Service: [
        ["default/b", "b"],
        ["default/a", "a"],
      ],
      EndpointSlice: [["default/a", "a"]],
      Node: [
        ["n", "n"],
        ["a", "a"],
      ],
      ServiceCIDR: [],
    });
    assert.equal(c.byKey.Service.get("default/a"), c.services[1]);
  });
});

describe("parseClusterFile: kind ServiceCIDR", () => {
  const range = (name: string, cidrs: string) =>
    `apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: { name: ${name} }\nspec: { cidrs: [${cidrs}] }\n`;

  test("ServiceCIDRs are read, a ServiceCIDRList too; an invalid one is skipped with its reason", () => {
    const list = `apiVersion: networking.k8s.io/v1\nkind: ServiceCIDRList\nitems:\n  - metadata: { name: listed }\n    spec: { cidrs: ["203.0.113.0/24"] }\n`;
    const c = contents(
      [
        range("kubernetes", '"198.51.100.0/24", "2001:db8:1::/112"'),
        range("bad", '"198.51.100.1/24"'),
        list,
      ].join("---\n"),
    );
    assert.deepEqual(
      c.serviceCIDRs.map((r) => [r.metadata.name, ...r.cidrs]),
      [
        ["kubernetes", "198.51.100.0/24", "2001:db8:1::/112"],
        ["listed", "203.0.113.0/24"],
      ],
    );
    assert.equal(c.invalid.length, 1);
    assert.equal(c.invalid[0]!.kind, "ServiceCIDR");
    assert.equal(c.invalid[0]!.name, "bad");
    assert.match(c.invalid[0]!.reason, /host bits set/);
  });
});

describe("parseClusterFile: bad objects are skipped, the rest is kept", () => {
  test("an invalid object is listed with its reason and line, and the others are read", () => {
    const bad = `apiVersion: v1\nkind: Service\nmetadata: { name: broken }\nspec:\n  ports: [{ port: 99999 }]\n`;
    const c = contents([service("good"), bad, node("n")].join("---\n"));
    assert.deepEqual(keys(c), { services: ["default/good"], endpointSlices: [], nodes: ["n"] });
    assert.equal(c.invalid.length, 1);
    const invalid = c.invalid[0]!;
    assert.equal(invalid.kind, "Service");
    assert.equal(invalid.name, "default/broken");
    assert.match(invalid.reason, /port/);
    // The bad document starts on the line after the good service and the "---" separator.
    assert.match(invalid.reason, /\(cluster\.yaml:\d+\)$/);
    const line = Number(/:(\d+)\)$/.exec(invalid.reason)?.[1]);
    assert.equal(line, service("good").split("\n").length + 1);
  });

  test("an invalid list item is named by its own line", () => {
    const text =
      "kind: List\nitems:\n  - kind: Node\n    metadata: { name: ok }\n  - kind: Node\n    metadata: {}\n";
    const c = contents(text);
    assert.deepEqual(keys(c).nodes, ["ok"]);
    assert.match(c.invalid[0]?.reason ?? "", /\(cluster\.yaml:5\)$/);
  });

  test("an invalid item of a JSON list is named by its line and its index", () => {
    const text = JSON.stringify({
      kind: "List",
      items: [
        { kind: "Node", metadata: { name: "ok" } },
        { kind: "Node", metadata: {} },
      ],
    });
    const c = contents(text);
    assert.deepEqual(keys(c).nodes, ["ok"]);
    assert.match(c.invalid[0]?.reason ?? "", /\(cluster\.yaml:1, items\[1\]\)$/);
  });

  test("a document that is not an object is invalid, not fatal", () => {
    const c = contents(["- just\n- a list\n", node("n")].join("---\n"));
    assert.deepEqual(keys(c).nodes, ["n"]);
    assert.equal(c.invalid.length, 1);
    assert.match(c.invalid[0]?.reason ?? "", /not an object/);
  });

  test("kinds a proxy does not read are ignored, not invalid", () => {
    const pod = "apiVersion: v1\nkind: Pod\nmetadata: { name: p, namespace: shop }\n";
    const deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: { name: d }\n";
    const c = contents([pod, deployment, node("n")].join("---\n"));
    assert.deepEqual(keys(c).nodes, ["n"]);
    assert.deepEqual(c.invalid, []);
    assert.equal(c.ignored.length, 2);
    assert.match(c.ignored[0] ?? "", /^Pod /);
    assert.match(c.ignored[1] ?? "", /^Deployment /);
  });
});

describe("parseClusterFile: a broken file as a whole", () => {
  test("a YAML syntax error makes the file unusable, with the file, line and column", () => {
    const text = `${node("n")}---\nkind: Node\nmetadata: { name: [unclosed\n`;
    const parsed = parseClusterFile(text, "cluster.yaml");
    assert.equal(parsed.ok, false);
    if (parsed.ok) return;
    assert.match(parsed.error, /^cluster\.yaml:\d+:\d+: YAML syntax error: /);
  });

  test("broken JSON is reported with its position too", () => {
    const parsed = parseClusterFile('{"kind": "Node",\n "metadata": {"name": "n"\n', "cluster.json");
    assert.equal(parsed.ok, false);
    if (!parsed.ok) assert.match(parsed.error, /^cluster\.json:\d+:\d+: YAML syntax error: /);
  });

  test("an alias bomb is refused instead of expanded", () => {
    const lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
    for (let i = 1; i < 12; i++) {
      const prev = String.fromCharCode(96 + i);
      const name = String.fromCharCode(97 + i);
      lines.push(`${name}: &${name} [${Array(10).fill(`*${prev}`).join(", ")}]`);
    }
    const parsed = parseClusterFile(lines.join("\n"), "bomb.yaml");
    assert.equal(parsed.ok, false);
    if (!parsed.ok) assert.match(parsed.error, /^bomb\.yaml: /);
  });
});

describe("parseClusterFile: positions in large streams and lists", () => {
  const lineOf = (reason: string) => Number(/:(\d+)(, items\[\d+\])?\)$/.exec(reason)?.[1]);
  const lineCount = (text: string) => text.split("\n").length - 1;

  test("an invalid object in a later document is named by its line in the file", () => {
    const bad = `apiVersion: v1\nkind: Service\nmetadata: { name: broken }\nspec:\n  ports: [{ port: 0 }]\n`;
    const docs = [service("a"), service("b"), node("n"), bad, node("m")];
    const text = docs.join("---\n");
    const c = contents(text);
    assert.deepEqual(keys(c).nodes, ["n", "m"]);
    assert.equal(c.invalid.length, 1);
    // Each document ends with a newline, and each "---" takes a line.
    const before = docs.slice(0, 3).reduce((n, d) => n + lineCount(d) + 1, 0);
    assert.equal(lineOf(c.invalid[0]!.reason), before + 1);
  });

  test("an invalid item of a kind: List in the second document is named by its own line", () => {
    const list =
      "apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: { name: ok }\n- kind: Node\n  metadata: {}\n";
    const text = `${node("first")}---\n${list}`;
    const c = contents(text);
    assert.deepEqual(keys(c).nodes, ["first", "ok"]);
    const listStart = lineCount(node("first")) + 2;
    assert.equal(lineOf(c.invalid[0]!.reason), listStart + 5);
  });

  test("a syntax error in a later document is placed by its line in the file", () => {
    const docs = [node("a"), node("b"), "kind: Node\nmetadata:\n  name: c\n   bad: indentation\n"];
    const parsed = parseClusterFile(docs.join("---\n"), "cluster.yaml");
    assert.equal(parsed.ok, false);
    if (parsed.ok) return;
    const m = /^cluster\.yaml:(\d+):(\d+): YAML syntax error: /.exec(parsed.error);
    assert.ok(m, parsed.error);
    const thirdStart = lineCount(node("a")) + lineCount(node("b")) + 3;
    // The mistake is on the fourth line of the third document (or where the parser notices it, the
    // line before, never in another document).
    assert.ok(Math.abs(Number(m[1]) - (thirdStart + 3)) <= 1, parsed.error);
  });

  test("document markers with comments, explicit ends and directives are all read", () => {
    const text = `%YAML 1.2\n---\nkind: Node\nmetadata: { name: a }\n...\n--- # the second\nkind: Node\nmetadata: { name: b }\n--- {kind: Node, metadata: {name: c}}\n`;
    assert.deepEqual(keys(contents(text)).nodes, ["a", "b", "c"]);
    assert.deepEqual(keys(contents(text.slice("%YAML 1.2\n".length))).nodes, ["a", "b", "c"]);
  });

  test("an invalid item of an indented JSON list is named by its line and index", () => {
    const text = JSON.stringify(
      {
        apiVersion: "v1",
        kind: "List",
        items: [
          { kind: "Node", metadata: { name: "ok" } },
          { kind: "Node", metadata: { name: "also-ok" } },
          { kind: "Node", metadata: {} },
        ],
      },
      null,
      4,
    );
    const c = contents(text);
    assert.deepEqual(keys(c).nodes, ["ok", "also-ok"]);
    const line =
      text
        .split("\n")
        .findIndex(
          (l, i, all) => l.trim() === "{" && all[i + 1]?.includes('"kind"') && all[i + 3]?.trim() === "}",
        ) + 1;
    assert.ok(line > 0);
    assert.match(c.invalid[0]?.reason ?? "", new RegExp(`\\(cluster\\.yaml:${line}, items\\[2\\]\\)$`));
  });

  test("the file's bytes read the same as its text", () => {
    const yamlText = [service("web", "shop"), slice("web-1", "web"), node("n")].join("---\n");
    const jsonText = JSON.stringify({ kind: "NodeList", items: [{ metadata: { name: "j" } }] });
    for (const text of [yamlText, jsonText]) {
      const fromBytes = parseClusterFile(Buffer.from(text), "cluster.yaml");
      assert.ok(fromBytes.ok);
      assert.deepEqual(fromBytes.contents, contents(text));
    }
  });

  test("Windows line ends and a byte order mark change neither the objects nor the lines", () => {
    const crlf = (name: string) => `kind: Node\r\nmetadata:\r\n  name: ${name}\r\n`;
    const text = `\ufeff${[crlf("a"), crlf("b"), "kind: Node\r\nmetadata: {}\r\n"].join("---\r\n")}`;
    const parsed = parseClusterFile(Buffer.from(text), "cluster.yaml");
    assert.ok(parsed.ok);
    assert.deepEqual(keys(parsed.contents).nodes, ["a", "b"]);
    assert.match(parsed.contents.invalid[0]?.reason ?? "", /\(cluster\.yaml:9\)$/);
  });

  test("YAML in flow style, which opens like JSON, is read as YAML", () => {
    assert.deepEqual(keys(contents("{kind: Node, metadata: {name: flow}}\n")).nodes, ["flow"]);
  });
});
