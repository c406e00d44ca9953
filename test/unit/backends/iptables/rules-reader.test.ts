// explain --rules iptables: what the backend programmed reads back without drift; a rule removed
// or changed by another program is drift.

import assert from "node:assert/strict";
import { test } from "node:test";
import { IptablesBackend } from "../../../../src/backends/iptables/backend.ts";
import { IptablesRulesReader } from "../../../../src/backends/iptables/rules-reader.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { FakeIptables } from "../../../support/fake-iptables.ts";
import { ep, port, service, state, V4, V6 } from "./fixtures.ts";

const web = service({ ports: [port({ nodePort: 30080 })], type: "NodePort" });
const empty = service({
  name: "empty",
  clusterIPs: ["203.0.113.11"],
  ports: [port({ internalEndpoints: [], externalEndpoints: [] })],
});

async function programmed(): Promise<FakeIptables> {
  const ipt = new FakeIptables();
  await new IptablesBackend({ runner: ipt, families: [V4, V6], log: silentLogger }).sync(state([web, empty]));
  return ipt;
}

test("the rules the backend programmed read back without drift", async () => {
  const reader = new IptablesRulesReader([V4, V6], await programmed());
  for (const svc of [web, empty]) {
    const report = await reader.read(svc);
    assert.deepEqual(report.drift, [], JSON.stringify(report, null, 2));
    assert.ok(report.objects.length > 0);
  }
});

test("a dispatch rule removed by another program is drift", async () => {
  const ipt = await programmed();
  ipt.edit("IPv4", "nat", (chains) => {
    const rules = chains.get("KPNG-SERVICES") ?? [];
    chains.set(
      "KPNG-SERVICES",
      rules.filter((r) => !r.includes("203.0.113.10/32")),
    );
  });
  const report = await new IptablesRulesReader([V4, V6], ipt).read(web);
  assert.deepEqual(
    report.drift.map((d) => d.object),
    ["iptables nat dispatch rules"],
  );
});

test("an endpoint the kernel still holds after it left is drift", async () => {
  const ipt = await programmed();
  const moved = service({
    ports: [
      port({
        nodePort: 30080,
        internalEndpoints: [ep("198.51.100.2")],
        externalEndpoints: [ep("198.51.100.2")],
      }),
    ],
    type: "NodePort",
  });
  const report = await new IptablesRulesReader([V4, V6], ipt).read(moved);
  assert.ok(
    report.drift.some((d) => d.object.startsWith("iptables nat KPNG-SVC-")),
    JSON.stringify(report.drift),
  );
});
