// Several local sinks after to-local: where the command line is cut, and which joins are refused.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import type { Invocation } from "../../../src/cli/invocation.ts";
import { joinSinkInvocations, sinkSegments } from "../../../src/cli/multi-sink.ts";
import type { LocalSinkPlugin, Owned } from "../../../src/plugin/contracts.ts";
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

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const CLUSTER = fileURLToPath(new URL("../../../examples/cluster.yaml", import.meta.url));

describe("joinSinkInvocations", () => {
  /** A sink that programs nft tables of the name in its options. */
  const sink = (name: string) =>
    ({
      name,
      owns: (o: { table?: string }): Owned[] =>
        o.table === undefined ? [] : [{ what: `nft tables ${o.table}`, fix: "another --table-name" }],
    }) as unknown as LocalSinkPlugin;
  const inv = (name: string, serviceProxyName: string, nodeName = "n1", table?: string): Invocation => ({
    form: "to-local",
    source: { name: "file" } as never,
    sourceOpts: {},
    sink: sink(name),
    sinkOpts: table === undefined ? {} : { table },
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
  test("sinks that would program the same objects are refused, naming them and the flag", () => {
    assert.throws(
      () => joinSinkInvocations([inv("to-nft", "", "n1", "kpng"), inv("to-ebpf", "legacy", "n1", "kpng")]),
      /to-nft and to-ebpf would both program nft tables kpng: another --table-name/,
    );
    const apart = joinSinkInvocations([
      inv("to-nft", "", "n1", "kpng"),
      inv("to-ebpf", "legacy", "n1", "k2"),
    ]);
    assert.equal(apart.form === "to-local" && apart.moreSinks?.length, 1);
  });
  test("the CLI: to-nft beside to-ebpf on one nft table exits 2 before anything starts", () => {
    const argv = (ebpfFlags: string[]) => [
      MAIN,
      "file",
      "--input",
      CLUSTER,
      "to-local",
      "to-nft",
      "--node-name",
      "n1",
      "to-ebpf",
      "--service-proxy-name",
      "legacy",
      "--node-name",
      "n1",
      ...ebpfFlags,
      // Were it to start, it would fail here rather than program this machine.
      "--bpf-object",
      "/nonexistent",
    ];
    const run = spawnSync(process.execPath, argv([]), { encoding: "utf8", timeout: 60_000 });
    assert.equal(run.status, 2, run.stderr);
    assert.match(
      run.stderr,
      /to-nft and to-ebpf would both program nft tables ip\/ip6 kpng: give one of them another --table-name/,
    );
  });
});
