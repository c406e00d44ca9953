import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Command } from "commander";
import type { Invocation, Plugins } from "../../../src/cli/invocation.ts";
import { buildProgram } from "../../../src/cli/program.ts";
import type { LocalSinkPlugin, RawOptions } from "../../../src/plugin/contracts.ts";

const unused = () => {
  throw new Error("not used in parsing tests");
};

const kernelSink: LocalSinkPlugin = {
  name: "to-kernel",
  description: "a backend with a cleanup",
  addOptions: (cmd: Command) => void cmd.option("--table <name>", "table", "kpng"),
  parseOptions: (raw) => raw,
  run: unused,
  cleanup: unused,
  binaries: [],
};

const plugins: Plugins = {
  sources: [
    {
      name: "file",
      description: "a file",
      addOptions: (cmd) => void cmd.requiredOption("--input <path>", "file"),
      parseOptions: (raw) => raw,
      create: unused,
    },
  ],
  localSinks: [
    {
      name: "to-json",
      description: "dump",
      defaultMinSyncPeriod: "0s",
      binaries: [],
      addOptions: (cmd) => void cmd.option("--once", "once"),
      parseOptions: (raw) => raw,
      run: unused,
    },
    kernelSink,
  ],
  globalSinks: [
    {
      name: "to-json",
      description: "dump",
      addOptions: () => undefined,
      parseOptions: (raw) => raw,
      run: unused,
    },
  ],
  localSources: [
    {
      name: "local",
      description: "remote",
      addOptions: (cmd) => void cmd.option("--api <addr>", "api"),
      parseOptions: (raw) => raw,
      createFeed: unused,
    },
  ],
};

interface Outcome {
  invocation?: Invocation;
  error?: string;
  exitCode?: number;
  stderr: string;
  stdout: string;
}

async function parse(args: string[]): Promise<Outcome> {
  const outcome: Outcome = { stderr: "", stdout: "" };
  const program = buildProgram(
    plugins,
    async (invocation) => {
      outcome.invocation = invocation;
    },
    {
      defaultNodeName: "this-host",
      configure: (root) =>
        root.exitOverride().configureOutput({
          writeErr: (s) => {
            outcome.stderr += s;
          },
          writeOut: (s) => {
            outcome.stdout += s;
          },
        }),
    },
  );
  try {
    await program.parseAsync(args, { from: "user" });
  } catch (err) {
    outcome.error = (err as Error).message;
    outcome.exitCode = (err as { exitCode?: number }).exitCode;
  }
  return outcome;
}

describe("kpng command line: the grammar forms", () => {
  test("<source> to-local <sink> gives the source, sink, node name and min sync period", async () => {
    const { invocation, error } = await parse([
      "file",
      "--input",
      "c.yaml",
      "to-local",
      "to-json",
      "--node-name",
      "n1",
      "--once",
    ]);
    assert.equal(error, undefined);
    assert.equal(invocation?.form, "to-local");
    if (invocation?.form !== "to-local") return;
    assert.equal(invocation.source.name, "file");
    assert.equal(invocation.sink.name, "to-json");
    assert.equal(invocation.nodeName, "n1");
    assert.equal(invocation.minSyncPeriodMs, 0, "to-json's own default");
    assert.equal((invocation.sourceOpts as RawOptions).input, "c.yaml");
    assert.equal((invocation.sinkOpts as RawOptions).once, true);
    assert.equal(invocation.serviceProxyName, "");
  });

  test("--node-name defaults to the host name, and a sink without its own default syncs at most every 1s", async () => {
    const { invocation } = await parse(["file", "--input", "c.yaml", "to-local", "to-kernel"]);
    assert.equal(invocation?.form, "to-local");
    if (invocation?.form !== "to-local") return;
    assert.equal(invocation.nodeName, "this-host");
    assert.equal(invocation.minSyncPeriodMs, 1000);
  });

  test("--min-sync-period takes a duration", async () => {
    const { invocation } = await parse([
      "file",
      "--input",
      "c",
      "to-local",
      "to-kernel",
      "--min-sync-period",
      "250ms",
    ]);
    assert.equal(invocation?.form === "to-local" && invocation.minSyncPeriodMs, 250);
  });

  for (const [where, args] of [
    [
      "before the sink words",
      ["file", "--service-proxy-name", "other", "--input", "c", "to-local", "to-json"],
    ],
    [
      "after the sink words",
      ["file", "--input", "c", "to-local", "to-json", "--service-proxy-name", "other"],
    ],
  ] as const) {
    test(`--service-proxy-name works ${where}`, async () => {
      const { invocation, error } = await parse([...args]);
      assert.equal(error, undefined);
      assert.equal(invocation?.form === "to-local" && invocation.serviceProxyName, "other");
    });
  }

  test("--service-cidrs gives fixed Service ranges to the brain, in both forms; unset, none", async () => {
    const local = await parse([
      "file",
      "--input",
      "c",
      "--service-cidrs",
      "198.51.100.0/24,2001:db8:1::/112",
      "to-local",
      "to-json",
    ]);
    assert.deepEqual(local.invocation?.form === "to-local" && local.invocation.serviceCIDRs, [
      "198.51.100.0/24",
      "2001:db8:1::/112",
    ]);
    const global = await parse(["file", "--input", "c", "to-json", "--service-cidrs", "203.0.113.0/24"]);
    assert.deepEqual(global.invocation?.form === "global" && global.invocation.serviceCIDRs, [
      "203.0.113.0/24",
    ]);
    const unset = await parse(["file", "--input", "c", "to-local", "to-json"]);
    assert.equal(unset.invocation?.form === "to-local" && unset.invocation.serviceCIDRs, undefined);
  });

  test("source options may also follow the sink words", async () => {
    const { invocation } = await parse(["file", "to-local", "to-json", "--input", "late.yaml"]);
    assert.equal(
      (invocation?.form === "to-local" ? (invocation.sourceOpts as RawOptions) : {}).input,
      "late.yaml",
    );
  });

  test("<source> <global-sink> gives the global form", async () => {
    const { invocation } = await parse(["file", "--input", "c", "to-json", "--service-proxy-name", "x"]);
    assert.equal(invocation?.form, "global");
    assert.equal(invocation?.form === "global" && invocation.serviceProxyName, "x");
  });

  test("local <sink> gives the local-source form, paced by --min-sync-period like every local sink", async () => {
    const { invocation } = await parse([
      "local",
      "--api",
      "unix:///run/kpng.sock",
      "to-json",
      "--node-name",
      "n2",
    ]);
    assert.equal(invocation?.form, "local");
    if (invocation?.form !== "local") return;
    assert.equal(invocation.localSource.name, "local");
    assert.equal(invocation.nodeName, "n2");
    assert.equal((invocation.sourceOpts as RawOptions).api, "unix:///run/kpng.sock");
    assert.equal(invocation.minSyncPeriodMs, 0, "to-json's own default");
    const paced = await parse(["local", "to-kernel", "--min-sync-period", "2s"]);
    assert.equal(paced.invocation?.form === "local" && paced.invocation.minSyncPeriodMs, 2000);
  });

  test("local <sink> --service-proxy-name asks the remote brain for that name; without it, the brain's own", async () => {
    const named = await parse(["local", "--api", "unix:///s", "to-json", "--service-proxy-name", "legacy"]);
    assert.equal(named.invocation?.form === "local" && named.invocation.serviceProxyName, "legacy");
    const unlabelled = await parse(["local", "to-json", "--service-proxy-name", ""]);
    assert.equal(unlabelled.invocation?.form === "local" && unlabelled.invocation.serviceProxyName, "");
    const plain = await parse(["local", "to-json"]);
    assert.equal(plain.invocation?.form === "local" && plain.invocation.serviceProxyName, undefined);
  });

  test("cleanup <backend> names the sink without its to- prefix and takes its options", async () => {
    const { invocation } = await parse(["cleanup", "kernel", "--table", "t2"]);
    assert.equal(invocation?.form, "cleanup");
    assert.equal(invocation?.form === "cleanup" && invocation.sink, kernelSink);
    assert.equal((invocation?.form === "cleanup" ? (invocation.sinkOpts as RawOptions) : {}).table, "t2");
  });
});

describe("kpng command line: mistakes exit non-zero and say what to fix", () => {
  const cases: { name: string; args: string[]; message: RegExp }[] = [
    {
      name: "an unknown option is named",
      args: ["file", "--input", "c", "to-local", "to-json", "--bogus"],
      message: /unknown option '--bogus'/,
    },
    {
      name: "a missing --input is named",
      args: ["file", "to-local", "to-json"],
      message: /'--input <path>' not specified/,
    },
    {
      name: "an invalid duration says which forms work",
      args: ["file", "--input", "c", "to-local", "to-json", "--min-sync-period", "soon"],
      message: /--min-sync-period.*"soon" is not a duration.*e\.g\. 1s/,
    },
    {
      name: "a service proxy name that no label can carry",
      args: ["local", "to-json", "--service-proxy-name", "two words"],
      message: /--service-proxy-name "two words": not a label value/,
    },
    {
      name: "an unknown sink is named",
      args: ["file", "--input", "c", "to-local", "to-nothing"],
      message: /unknown command 'to-nothing'/,
    },
    {
      name: "an unknown source is named",
      args: ["nowhere", "to-local", "to-json"],
      message: /unknown command 'nowhere'/,
    },
    {
      name: "a missing local sink lists the local sinks",
      args: ["file", "--input", "c", "to-local"],
      message: /name a local sink; choose one of: to-json, to-kernel/,
    },
    {
      name: "a missing sink lists to-local and the global sinks",
      args: ["file", "--input", "c"],
      message: /name a sink; choose one of: to-local <local-sink>, to-json/,
    },
    {
      name: "an empty node name is refused",
      args: ["file", "--input", "c", "to-local", "to-json", "--node-name", ""],
      message: /--node-name: must not be empty/,
    },
    {
      name: "a --service-cidrs entry that is not a CIDR",
      args: ["file", "--input", "c", "--service-cidrs", "198.51.100.0/24,nonsense", "to-local", "to-json"],
      message: /--service-cidrs: "nonsense" is not a CIDR/,
    },
    {
      name: "cleanup of a backend without a cleanup lists those that have one",
      args: ["cleanup", "json"],
      message: /no backend "json" with a cleanup; choose one of: kernel/,
    },
  ];
  for (const tc of cases) {
    test(tc.name, async () => {
      const outcome = await parse(tc.args);
      assert.equal(outcome.invocation, undefined, "nothing runs");
      assert.ok(outcome.exitCode !== undefined && outcome.exitCode !== 0, `exit code ${outcome.exitCode}`);
      assert.match(outcome.stderr, tc.message);
      assert.match(outcome.stderr, /add --help for usage/);
    });
  }
});

describe("kpng command line: help", () => {
  test("the top-level help lists every form, source and sink", async () => {
    const { stdout } = await parse(["--help"]);
    for (const text of [
      "file",
      "local",
      "cleanup",
      "to-local <local-sink>",
      "Local sinks:  to-json, to-kernel",
    ]) {
      assert.ok(stdout.includes(text), `help mentions ${text}`);
    }
  });

  test("a sink's help lists its own and the added options", async () => {
    const { stdout } = await parse(["file", "to-local", "to-json", "--help"]);
    for (const text of ["--node-name", "--min-sync-period", "(default: 0s)", "--once"]) {
      assert.ok(stdout.includes(text), `help mentions ${text}`);
    }
  });
});
