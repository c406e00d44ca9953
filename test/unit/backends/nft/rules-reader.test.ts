// explain --rules nft: elements are read one at a time (never a listing of a map or of a chain's
// rules) and compared with the renderer's; nft's text answers are parsed back to kpng's keys.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { TableConfig } from "../../../../src/backends/nft/fragment.ts";
import { serviceFragment } from "../../../../src/backends/nft/render-service.ts";
import { elementsOfText, type NftQuery, NftRulesReader } from "../../../../src/backends/nft/rules-reader.ts";
import { ep, port, service } from "./fixtures.ts";

const CFG: TableConfig = {
  family: "ip",
  table: "kpng",
  nodePortCIDRs: [],
  podCIDRs: [],
  masqueradeAll: false,
  nodeIPs: [],
};

/** A kernel holding `elements` (set → key → value) and `chains`; records every query. */
class FakeQuery implements NftQuery {
  readonly asked: string[] = [];
  readonly elements: Map<string, Map<string, string>>;
  readonly chains: Set<string>;
  constructor(elements: Map<string, Map<string, string>>, chains: Set<string>) {
    this.elements = elements;
    this.chains = chains;
  }
  async json(args: readonly string[]): Promise<unknown> {
    this.asked.push(args.join(" "));
    if (args.includes("maps"))
      return {
        nftables: [...this.elements.keys()].map((name) => ({ map: { family: "ip", table: "kpng", name } })),
      };
    return { nftables: [...this.chains].map((name) => ({ chain: { family: "ip", table: "kpng", name } })) };
  }
  async text(args: readonly string[]): Promise<string | undefined> {
    this.asked.push(args.join(" "));
    const [, , , , set = "", braced = ""] = args;
    const key = braced.replace(/^\{ | \}$/g, "");
    const value = this.elements.get(set)?.get(key);
    if (value === undefined) return undefined;
    return `table ip kpng {\n\tmap ${set} {\n\t\telements = { ${value === "" ? key : `${key} : ${value}`} }\n\t}\n}\n`;
  }
}

/** The kernel as the backend would have programmed `svc`. */
function kernelOf(svc = service(), cfg: TableConfig = CFG): FakeQuery {
  const f = serviceFragment(svc, cfg);
  const elements = new Map<string, Map<string, string>>();
  const put = (set: string, key: string, value: string) => {
    if (!elements.has(set)) elements.set(set, new Map());
    elements.get(set)?.set(key, value);
  };
  for (const e of f.elements) put(e.set, e.key, e.value);
  // Slots kept across changes: the kernel may hold the endpoints in another order.
  for (const g of f.groups) {
    for (const [i, v] of [...g.values].reverse().entries()) put(g.set, `${g.prefix}${i}`, v);
  }
  return new FakeQuery(elements, new Set([...f.chains, ...f.sharedChains].map((c) => c.name)));
}

test("nft's text answer to get element is parsed back to kpng's keys and values", () => {
  const text =
    "table ip kpng {\n\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = { 203.0.113.10 . tcp . 80 : goto pick-cluster-tcp-2 }\n\t}\n}\n";
  assert.deepEqual([...elementsOfText(text)], [["203.0.113.10 . tcp . 80", "goto pick-cluster-tcp-2"]]);
  assert.deepEqual(
    [...elementsOfText("set cluster-ips {\n elements = { 203.0.113.10 }\n}")],
    [["203.0.113.10", ""]],
  );
});

test("a Service the kernel holds as rendered: no drift, and only get element and list chains", async () => {
  const kernel = kernelOf();
  const report = await new NftRulesReader([CFG], kernel).read(service());
  assert.deepEqual(report.drift, []);
  assert.ok(report.objects.length > 0);
  for (const q of kernel.asked) assert.match(q, /^(get element ip kpng |list chains ip|-t list maps ip)/);
});

test("a table a restart moved to the other generation of endpoint maps is read there: no drift", async () => {
  const kernel = kernelOf(service(), { ...CFG, generation: 1 });
  assert.ok(kernel.elements.has("endpoints-tcp-g1"));
  const report = await new NftRulesReader([CFG], kernel).read(service());
  assert.deepEqual(report.drift, []);
  assert.ok(report.objects.some((o) => o.name === "ip kpng endpoints-tcp-g1"));
});

test("a missing element, a stale no-endpoint element and a changed endpoint are drift", async () => {
  const kernel = kernelOf();
  kernel.elements.get("service-ips")?.clear();
  kernel.elements.set("no-endpoint-services", new Map([["203.0.113.10 . tcp . 80", "goto reject-chain"]]));
  const moved = service({
    ports: [port({ internalEndpoints: [ep("198.51.100.2"), ep("198.51.100.9")] })],
  });
  const report = await new NftRulesReader([CFG], kernel).read(moved);
  const objects = report.drift.map((d) => d.object);
  assert.ok(objects.includes("ip kpng service-ips 203.0.113.10 . tcp . 80"), objects.join("\n"));
  assert.ok(objects.includes("ip kpng no-endpoint-services 203.0.113.10 . tcp . 80"), objects.join("\n"));
  assert.ok(
    objects.some((o) => o.endsWith("*")),
    objects.join("\n"),
  );
});
