// `npm start` end to end: the demo builds its namespaces, runs kpng with the nft backend on the
// bundled example, shows which pods answered, cleans up and exits 0. Without root it falls back
// to printing the node-local state.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { netnsSkipReason, runCommand, Spawned } from "../../support/netns.ts";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const DEMO = fileURLToPath(new URL("../../../tools/demo/main.ts", import.meta.url));
const skip = await netnsSkipReason();

/** The table row for a Service target, split into its columns. */
function row(output: string, service: string, via: string, target: string): string {
  const line = output
    .split("\n")
    .find((l) => l.startsWith(`${service} `) && l.includes(` ${via} `) && l.includes(` ${target} `));
  assert.ok(line !== undefined, `no row for ${service} ${via} ${target} in:\n${output}`);
  return line;
}

/** The pod names that answered in a row ("web-1 ×3, web-2 ×1" → ["web-1", "web-2"]). */
function answeredBy(line: string): string[] {
  return [...line.matchAll(/([\w.-]+) ×\d+/g)].map((m) => m[1] ?? "");
}

describe("npm start as root", { skip }, () => {
  test("programs nft in a private network, shows which pod answered, and leaves nothing behind", async () => {
    const demo = new Spawned([process.execPath, DEMO], { name: "demo", cwd: ROOT });
    const exit = await demo.exited;
    const out = demo.stdout();
    assert.equal(exit.code, 0, demo.describe());

    const web = answeredBy(row(out, "default/web:http", "ClusterIP", "tcp 203.0.113.10:80"));
    assert.ok(web.length > 0 && web.every((p) => p.startsWith("web-6c9f7d-")), out);
    const nodePort = answeredBy(row(out, "default/api:http", "NodePort", "tcp 192.0.2.11:30080"));
    assert.ok(nodePort.length > 0 && nodePort.every((p) => p.startsWith("api-5b8d4-")), out);
    const lb = answeredBy(row(out, "default/frontend:https", "LoadBalancer", "tcp 203.0.113.200:443"));
    assert.ok(lb.length > 0 && lb.every((p) => p.startsWith("frontend-7f6c5-")), out);
    const ipv6 = answeredBy(row(out, "default/dual:http", "ClusterIP", "tcp [2001:db8:2::16]:80"));
    assert.ok(ipv6.length > 0 && ipv6.every((p) => p.startsWith("dual-8a7b6-")), out);
    // internalTrafficPolicy Local: only node-1's own agent answers.
    assert.deepEqual(answeredBy(row(out, "default/metrics-agent", "ClusterIP", "tcp 203.0.113.15:9100")), [
      "metrics-agent-abcde",
    ]);
    // The fallback act: the status Service's traffic moves to the sorry page and back.
    assert.match(
      out,
      /its own pod is ready, the fallback slices inactive: answered by status-9d8c7-abcde \(/,
    );
    assert.match(out, /the fallback slices are active: answered by sorry-page-1a2b3-abcde \(/);
    assert.match(out, /back to its own pod: answered by status-9d8c7-abcde \(/);

    const { stdout } = await runCommand(["ip", "netns", "list"]);
    assert.doesNotMatch(stdout, new RegExp(`kpt-${demo.pid}-`), "the demo left namespaces behind");
  });
});

const setpriv = spawnSync("setpriv", ["--version"]).status === 0;
describe("npm start without root", {
  skip: process.getuid?.() !== 0 || !setpriv ? "needs root and setpriv to drop to nobody" : false,
}, () => {
  test("says why and prints the node-local state instead", async () => {
    const demo = new Spawned(
      ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, DEMO],
      { name: "demo as nobody", cwd: ROOT },
    );
    const exit = await demo.exited;
    assert.equal(exit.code, 0, demo.describe());
    assert.match(demo.stdout(), /the nft demo needs root to create network namespaces/i);
    assert.match(demo.stdout(), /"node": "node-1"/);
  });
});
