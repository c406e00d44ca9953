import assert from "node:assert/strict";
import { test } from "node:test";
import { renderTable, summarizeAnswers, summarizeSources } from "../../../tools/demo/report.ts";
import type { EchoReply } from "../../../tools/netns/echo-reply.ts";
import type { ProbeResult } from "../../../tools/netns/probe.ts";

function answer(name: string, client = "198.51.100.200"): ProbeResult {
  const reply: EchoReply = {
    name,
    proto: "tcp",
    client: { address: client, port: 1 },
    server: { address: "", port: 2 },
  };
  return { ok: true, answer: JSON.stringify(reply), reply, ms: 1 };
}
const timeout: ProbeResult = { ok: false, failure: "timeout", message: "", ms: 1000 };

const cases: { name: string; results: ProbeResult[]; answers: string; sources: string }[] = [
  {
    name: "answers are counted per endpoint in order of first appearance",
    results: [answer("b"), answer("a"), answer("b")],
    answers: "b ×2, a ×1",
    sources: "198.51.100.200",
  },
  {
    name: "failures are counted by class next to answers",
    results: [answer("a", "192.0.2.11"), timeout, timeout],
    answers: "a ×1, timeout ×2",
    sources: "192.0.2.11",
  },
  {
    name: "an answer that is not an echo reply is marked",
    results: [{ ok: true, answer: "hello", reply: undefined, ms: 1 }],
    answers: "(not an echo reply) ×1",
    sources: "",
  },
];
for (const tc of cases) {
  test(tc.name, () => {
    assert.equal(summarizeAnswers(tc.results), tc.answers);
    assert.equal(summarizeSources(tc.results), tc.sources);
  });
}

test("the table has a header, aligned columns and IPv6 targets in brackets", () => {
  const table = renderTable([
    {
      target: {
        service: "default/web",
        via: "ClusterIP",
        from: "client",
        proto: "tcp",
        host: "2001:db8:2::1",
        port: 80,
      },
      results: [answer("web-1")],
    },
  ]);
  assert.equal(
    table,
    [
      "SERVICE      VIA        FROM    TARGET                  ANSWERED BY  SOURCE SEEN BY POD",
      "-----------  ---------  ------  ----------------------  -----------  ------------------",
      "default/web  ClusterIP  client  tcp [2001:db8:2::1]:80  web-1 ×1     198.51.100.200",
    ].join("\n"),
  );
});
