// Builds the command tree from the plug-in lists:
//   kpng <source> [source options] to-local <local-sink> [sink options]
//   kpng <source> [source options] <global-sink> [sink options]
//   kpng <local-source> [options] <local-sink> [sink options]      (e.g. kpng local --api …)
//   kpng cleanup <backend> [options]
//   kpng <controller> [options]                                   (e.g. kpng fallback-controller)
// Parsing only: what a command line asks for is handed to `run` as an Invocation.

import { hostname } from "node:os";
import { Command, Option } from "commander";
import { z } from "zod";
import { isServiceProxyName } from "../brain/selection.ts";
import type { LocalSinkPlugin, RawOptions } from "../plugin/contracts.ts";
import { durationFlag, parsedBy, parseOptionsWith } from "../plugin/options.ts";
import { parseServiceCIDRsFlag, SERVICE_CIDRS_FLAG } from "../plugin/service-cidrs-flag.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { addExplainCommand } from "./explain.ts";
import type { Invocation, Plugins } from "./invocation.ts";

const SERVICE_PROXY_NAME_HELP =
  "serve only Services labelled service.kubernetes.io/service-proxy-name=<name> (default: only those without the label)";

interface ProgramOptions {
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
    cmd.option("--service-proxy-name <name>", SERVICE_PROXY_NAME_HELP);
    cmd.option(
      `${SERVICE_CIDRS_FLAG} <cidrs>`,
      "the cluster's Service IP ranges, comma-separated, IPv4 and/or IPv6; overrides ServiceCIDR objects",
    );
    source.addOptions(cmd);
    const toLocal = cmd
      .command("to-local")
      .description("compute one node's local state and hand it to a local sink");
    for (const sink of plugins.localSinks) {
      addLocalSinkCommand(toLocal, sink, defaultNodeName, run, (c) => ({
        form: "to-local",
        source,
        sourceOpts: source.parseOptions(c.raw),
        sink,
        sinkOpts: sink.parseOptions(c.raw),
        ...sourceFlags(c.raw),
        nodeName: c.nodeName,
        minSyncPeriodMs: c.minSyncPeriodMs,
      }));
    }
    for (const sink of plugins.globalSinks) {
      const sinkCmd = cmd.command(sink.name).description(sink.description);
      sink.addOptions(sinkCmd);
      sinkCmd.action((_o: RawOptions, c: Command) =>
        usageErrorsOf(c, () => {
          const raw = c.optsWithGlobals<RawOptions>();
          return {
            form: "global",
            source,
            sourceOpts: source.parseOptions(raw),
            sink,
            sinkOpts: sink.parseOptions(raw),
            ...sourceFlags(raw),
          };
        }).then(run),
      );
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
    cmd.option(
      "--service-proxy-name <name>",
      'the Services labelled service.kubernetes.io/service-proxy-name=<name> ("" for those without the label) ' +
        "as the remote brain computes them (default: the brain's own; another needs to-api --every-service-proxy-name)",
    );
    localSource.addOptions(cmd);
    for (const sink of plugins.localSinks) {
      addLocalSinkCommand(cmd, sink, defaultNodeName, run, (c) => ({
        form: "local",
        localSource,
        sourceOpts: localSource.parseOptions(c.raw),
        sink,
        sinkOpts: sink.parseOptions(c.raw),
        serviceProxyName: parseOptionsWith(sourceCommonFlags, c.raw).serviceProxyName,
        nodeName: c.nodeName,
        minSyncPeriodMs: c.minSyncPeriodMs,
      }));
    }
    const localSinkNames = plugins.localSinks.map((s) => s.name);
    requireSubcommand(cmd, "a local sink", localSinkNames, "[options] <local-sink> [sink options]");
  }

  for (const controller of plugins.controllers ?? []) {
    // A name of two words ("ebpf list") is a sub-command of the first.
    const words = controller.name.split(" ");
    let parent = root;
    for (const w of words.slice(0, -1)) {
      parent = parent.commands.find((c) => c.name() === w) ?? parent.command(w);
    }
    const cmd = parent.command(words.at(-1) ?? controller.name).description(controller.description);
    controller.addOptions(cmd);
    cmd.action((_o: RawOptions, c: Command) =>
      usageErrorsOf(c, () => ({
        form: "controller",
        controller,
        opts: controller.parseOptions(c.opts()),
      })).then(run),
    );
  }

  addCleanupCommand(root, plugins.localSinks, run);
  addExplainCommand(root, plugins.localSinks, defaultNodeName, (c, parse) =>
    usageErrorsOf(c, () => ({ form: "explain", request: parse() })).then(run),
  );
  root.addHelpText("after", grammarHelp(plugins));
  return root;
}

interface LocalSinkChoice {
  readonly raw: RawOptions;
  readonly nodeName: string;
  readonly minSyncPeriodMs: number;
}

const localSinkOptions = () => {
  return z.object({
    nodeName: z
      .string()
      .transform((s) => s.trim())
      .refine((s) => s !== "", { message: "must not be empty" }),
    // commander supplies the sink's default when the flag is absent.
    minSyncPeriod: durationFlag(0, ""),
  });
};

function addLocalSinkCommand(
  parent: Command,
  sink: LocalSinkPlugin,
  defaultNodeName: string,
  run: (invocation: Invocation) => Promise<void>,
  toInvocation: (choice: LocalSinkChoice) => Invocation,
): void {
  const cmd = parent.command(sink.name).description(sink.description);
  cmd.option("--node-name <name>", "the node whose local state is served", defaultNodeName);
  const defaultPeriod = sink.defaultMinSyncPeriod ?? "1s";
  cmd.addOption(
    new Option(
      "--min-sync-period <duration>",
      "the shortest time between two states handed to the sink",
    ).default(defaultPeriod, defaultPeriod),
  );
  sink.addOptions(cmd);
  const common = localSinkOptions();
  cmd.action((_o: RawOptions, c: Command) =>
    usageErrorsOf(c, () => {
      const raw = c.optsWithGlobals<RawOptions>();
      const { nodeName, minSyncPeriod } = parseOptionsWith(common, raw);
      return toInvocation({ raw, nodeName, minSyncPeriodMs: minSyncPeriod });
    }).then(run),
  );
}

/**
 * Every option is parsed (and every plug-in's parseOptions called) before anything runs; a
 * UsageError becomes commander's usage error: message, "(add --help for usage)", exit 2.
 */
async function usageErrorsOf(cmd: Command, parse: () => Invocation): Promise<Invocation> {
  // async: a synchronous throw from parse() becomes a rejection commander's parseAsync reports.
  try {
    return parse();
  } catch (err) {
    if (err instanceof UsageError) cmd.error(`error: ${err.message}`, { exitCode: 2, code: "kpng.usage" });
    throw err;
  }
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
    cmd.action((_o: RawOptions, c: Command) =>
      usageErrorsOf(c, () => ({
        form: "cleanup",
        sink,
        sinkOpts: sink.parseOptions(c.optsWithGlobals()),
      })).then(run),
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

/**
 * The flags every source takes: --service-proxy-name ("" serves the unlabelled Services; unset
 * stays unset for a local source, which then takes the brain's) and --service-cidrs (unset: the
 * ranges come from ServiceCIDR objects).
 */
const sourceCommonFlags = z.object({
  serviceProxyName: z
    .string()
    .optional()
    .transform((text, ctx) => {
      const name = text?.trim();
      if (name === undefined || isServiceProxyName(name)) return name;
      ctx.addIssue({
        code: "custom",
        message: `--service-proxy-name ${JSON.stringify(name)}: not a label value (at most 63 characters: letters, digits, "-", "_", "." inside)`,
      });
      return z.NEVER;
    }),
  serviceCidrs: z
    .string()
    .optional()
    .transform(parsedBy((text) => (text === undefined ? undefined : parseServiceCIDRsFlag(text)))),
});

function sourceFlags(raw: RawOptions): {
  serviceProxyName: string;
  serviceCIDRs: readonly string[] | undefined;
} {
  const f = parseOptionsWith(sourceCommonFlags, raw);
  return { serviceProxyName: f.serviceProxyName ?? "", serviceCIDRs: f.serviceCidrs };
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
    "  kpng explain NAMESPACE/NAME|IP:PORT[/PROTOCOL] (--input FILE|--kubeconfig FILE|--api ADDRESS) [--rules BACKEND]",
    "  kpng kube-proxy [--config FILE] [kube-proxy flags]    (in place of kube-proxy)",
    "  kpng cleanup kube-proxy                              (remove what kube-proxy left)",
    ...(plugins.controllers ?? []).map((c) => `  kpng ${c.name} [options]`),
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
