// Builds the command tree from the plug-in lists:
//   kpng <source> [source options] to-local <local-sink> [sink options]
//   kpng <source> [source options] <global-sink> [sink options]
//   kpng <local-source> [options] <local-sink> [sink options]      (e.g. kpng local --api …)
//   kpng cleanup <backend> [options]
// Parsing only: what a command line asks for is handed to `run` as an Invocation.

import { hostname } from "node:os";
import { Command, InvalidArgumentError, Option } from "commander";
import type { LocalSinkPlugin, Options } from "../plugin/contracts.ts";
import { parseDuration } from "../plugin/duration.ts";
import { parseServiceCIDRsFlag, SERVICE_CIDRS_FLAG } from "../plugin/service-cidrs-flag.ts";
import type { Invocation, Plugins } from "./invocation.ts";

export interface ProgramOptions {
  /** Applied to the root before any sub-command exists, so sub-commands inherit it (tests use exitOverride). */
  readonly configure?: (root: Command) => void;
  /** The default of --node-name; the host name, as kube-proxy does. */
  readonly defaultNodeName?: string;
}

export function buildProgram(
  plugins: Plugins,
  run: (invocation: Invocation) => Promise<void>,
  options: ProgramOptions = {},
): Command {
  const root = new Command("kpng")
    .description(
      "Kubernetes service proxy: a source feeds the brain, which computes each node's Service state for a sink",
    )
    .showHelpAfterError("(add --help for usage)");
  options.configure?.(root);
  const defaultNodeName = options.defaultNodeName ?? hostname().trim().toLowerCase();

  for (const source of plugins.sources) {
    const cmd = root.command(source.name).description(source.description);
    cmd.option(
      "--service-proxy-name <name>",
      "serve only Services labelled service.kubernetes.io/service-proxy-name=<name> (default: only those without the label)",
    );
    cmd.addOption(
      new Option(
        `${SERVICE_CIDRS_FLAG} <cidrs>`,
        "the cluster's Service IP ranges, comma-separated, IPv4 and/or IPv6; overrides ServiceCIDR objects",
      ).argParser(serviceCIDRsArgument),
    );
    source.addOptions(cmd);
    const toLocal = cmd
      .command("to-local")
      .description("compute one node's local state and hand it to a local sink");
    for (const sink of plugins.localSinks) {
      addLocalSinkCommand(toLocal, sink, { defaultNodeName, withMinSyncPeriod: true }, (c) =>
        run({
          form: "to-local",
          source,
          sink,
          serviceProxyName: stringOption(c.opts, "serviceProxyName"),
          serviceCIDRs: serviceCIDRsOption(c.opts),
          ...c,
        }),
      );
    }
    for (const sink of plugins.globalSinks) {
      const sinkCmd = cmd.command(sink.name).description(sink.description);
      sink.addOptions(sinkCmd);
      sinkCmd.action((_o: Options, c: Command) => {
        const opts = c.optsWithGlobals<Options>();
        return run({
          form: "global",
          source,
          sink,
          opts,
          serviceProxyName: stringOption(opts, "serviceProxyName"),
          serviceCIDRs: serviceCIDRsOption(opts),
        });
      });
    }
    const localSinkNames = plugins.localSinks.map((s) => s.name);
    requireSubcommand(toLocal, "a local sink", localSinkNames, "<local-sink> [sink options]");
    const sinkNames = ["to-local <local-sink>", ...plugins.globalSinks.map((s) => s.name)];
    requireSubcommand(
      cmd,
      "a sink",
      sinkNames,
      "[options] (to-local <local-sink> | <global-sink>) [sink options]",
    );
  }

  for (const localSource of plugins.localSources) {
    const cmd = root.command(localSource.name).description(localSource.description);
    localSource.addOptions(cmd);
    for (const sink of plugins.localSinks) {
      // The remote brain paces the stream, so there is no --min-sync-period here.
      addLocalSinkCommand(cmd, sink, { defaultNodeName, withMinSyncPeriod: false }, ({ opts, nodeName }) =>
        run({ form: "local", localSource, sink, opts, nodeName }),
      );
    }
    const localSinkNames = plugins.localSinks.map((s) => s.name);
    requireSubcommand(cmd, "a local sink", localSinkNames, "[options] <local-sink> [sink options]");
  }

  addCleanupCommand(root, plugins.localSinks, run);
  root.addHelpText("after", grammarHelp(plugins));
  return root;
}

interface LocalSinkChoice {
  readonly opts: Options;
  readonly nodeName: string;
  readonly minSyncPeriodMs: number;
}

function addLocalSinkCommand(
  parent: Command,
  sink: LocalSinkPlugin,
  how: { readonly defaultNodeName: string; readonly withMinSyncPeriod: boolean },
  onRun: (choice: LocalSinkChoice) => Promise<void>,
): void {
  const cmd = parent.command(sink.name).description(sink.description);
  cmd.option("--node-name <name>", "the node whose local state is served", how.defaultNodeName);
  if (how.withMinSyncPeriod) {
    const defaultPeriod = sink.defaultMinSyncPeriod ?? "1s";
    cmd.addOption(
      new Option("--min-sync-period <duration>", "the shortest time between two states handed to the sink")
        .argParser(durationArgument)
        .default(parseDuration(defaultPeriod), defaultPeriod),
    );
  }
  sink.addOptions(cmd);
  cmd.action((_o: Options, c: Command) => {
    const opts = c.optsWithGlobals<Options>();
    const nodeName = stringOption(opts, "nodeName");
    if (nodeName === "") c.error("error: --node-name must not be empty");
    const minSyncPeriodMs = typeof opts.minSyncPeriod === "number" ? opts.minSyncPeriod : 0;
    return onRun({ opts, nodeName, minSyncPeriodMs });
  });
}

function addCleanupCommand(
  root: Command,
  sinks: readonly LocalSinkPlugin[],
  run: (i: Invocation) => Promise<void>,
) {
  const withCleanup = sinks.filter((s) => s.cleanup !== undefined);
  const names = withCleanup.map(cleanupName);
  const cleanup = root
    .command("cleanup")
    .description(`remove the rules a backend installed (${names.join(", ") || "no backend has a cleanup"})`)
    .argument("[backend]", "the backend to clean up");
  for (const sink of withCleanup) {
    const cmd = cleanup.command(cleanupName(sink)).description(`remove what ${sink.name} installed`);
    sink.addOptions(cmd);
    cmd.action((_o: Options, c: Command) =>
      run({ form: "cleanup", sink, opts: c.optsWithGlobals<Options>() }),
    );
  }
  // Reached only when the word after `cleanup` names no backend with a cleanup.
  cleanup.action((backend: string | undefined) => {
    const which = backend === undefined ? "name a backend" : `no backend "${backend}" with a cleanup`;
    cleanup.error(`error: ${which}; choose one of: ${names.join(", ") || "(none installed)"}`);
  });
}

/**
 * Makes a command that only dispatches say what is missing or unknown, instead of printing its
 * help alone. Runs only when the word after the command names none of its sub-commands.
 */
function requireSubcommand(cmd: Command, what: string, choices: readonly string[], usage: string): void {
  cmd.usage(usage);
  cmd.argument("[command]").action((word: string | undefined) => {
    const problem = word === undefined ? `name ${what}` : `unknown command '${word}': expected ${what}`;
    cmd.error(`error: ${problem}; choose one of: ${choices.join(", ") || "(none installed)"}`);
  });
}

/** `kpng cleanup nft` cleans up after `to-nft`. */
function cleanupName(sink: LocalSinkPlugin): string {
  return sink.name.replace(/^to-/, "");
}

function serviceCIDRsArgument(value: string): string[] {
  try {
    return parseServiceCIDRsFlag(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

function serviceCIDRsOption(opts: Options): readonly string[] | undefined {
  const value = opts.serviceCidrs;
  return Array.isArray(value) ? (value as string[]) : undefined;
}

function durationArgument(value: string): number {
  try {
    return parseDuration(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

function stringOption(opts: Options, name: string): string {
  const value = opts[name];
  return typeof value === "string" ? value : "";
}

function grammarHelp(plugins: Plugins): string {
  const list = (names: readonly string[]) => names.join(", ") || "(none)";
  const sources = plugins.sources.map((s) => s.name);
  const lines = [
    "",
    "Forms:",
    "  kpng <source> [source options] to-local <local-sink> [sink options]",
    "  kpng <source> [source options] <global-sink> [sink options]",
    ...plugins.localSources.map((s) => `  kpng ${s.name} [options] <local-sink> [sink options]`),
    "  kpng cleanup <backend> [options]",
    "",
    `Sources:      ${list(sources)}`,
    `Local sinks:  ${list(plugins.localSinks.map((s) => s.name))}`,
    `Global sinks: ${list(plugins.globalSinks.map((s) => s.name))}`,
    "",
    "Examples:",
    "  kpng file --input examples/cluster.yaml to-local to-json --node-name node-1 --once",
    "  kpng file --input examples/cluster.yaml to-json --once",
    "",
    "Every command has --help, e.g. kpng file to-local to-json --help.",
  ];
  return lines.join("\n");
}
