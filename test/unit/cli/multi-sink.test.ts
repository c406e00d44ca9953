// Several local sinks after to-local: where the command line is cut, and which joins are refused.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Invocation } from "../../../src/cli/invocation.ts";
import { joinSinkInvocations, sinkSegments } from "../../../src/cli/multi-sink.ts";
import type { LocalSinkPlugin } from "../../../src/plugin/contracts.ts";
import { UsageError } from "../../../src/plugin/usage-error.ts";

const SINKS = ["to-json", "to-nft", "to-iptables"];

describe("sinkSegments", () => {
  test("one sink: not cut", () => {
    assert.equal(sinkSegments(["kube", "to-local", "to-nft", "--node-name", "n1"], SINKS), undefined);
  });
  test("two sinks: each gets the source's words and its own", () => {
    const words = [
      "kube",
      "--kubeconfig",
      "k",
      "to-local",
      "to-nft",
      "--node-name",
      "n1",
      "to-iptables",
      "--service-proxy-name",
      "legacy",
    ];
    assert.deepEqual(sinkSegments(words, SINKS), [
      ["kube", "--kubeconfig", "k", "to-local", "to-nft", "--node-name", "n1"],
      ["kube", "--kubeconfig", "k", "to-local", "to-iptables", "--service-proxy-name", "legacy"],
    ]);
  });
  test("not a to-local command line: not cut", () => {
    assert.equal(sinkSegments(["local", "to-nft", "to-iptables"], SINKS), undefined);
  });
});

describe("joinSinkInvocations", () => {
  const sink = (name: string) => ({ name }) as LocalSinkPlugin;
  const inv = (name: string, serviceProxyName: string, nodeName = "n1"): Invocation => ({
    form: "to-local",
    source: { name: "file" } as never,
    sourceOpts: {},
    sink: sink(name),
    sinkOpts: {},
    serviceProxyName,
    serviceCIDRs: undefined,
    nodeName,
    minSyncPeriodMs: 1000,
  });

  test("sinks of distinct proxy names join into one invocation", () => {
    const joined = joinSinkInvocations([inv("to-nft", ""), inv("to-iptables", "legacy")]);
    assert.equal(joined.form, "to-local");
    assert.equal(joined.form === "to-local" && joined.moreSinks?.[0]?.serviceProxyName, "legacy");
  });
  test("two sinks for the same Services are refused", () => {
    assert.throws(() => joinSinkInvocations([inv("to-nft", ""), inv("to-iptables", "")]), UsageError);
  });
  test("sinks for different nodes are refused", () => {
    assert.throws(
      () => joinSinkInvocations([inv("to-nft", ""), inv("to-iptables", "x", "n2")]),
      /--node-name/,
    );
  });
});
