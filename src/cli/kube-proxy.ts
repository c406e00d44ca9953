// Wiring for the kube-proxy drop-in forms, which take kube-proxy's own flags rather than kpng's:
//   kpng kube-proxy [--config FILE] [kube-proxy flags]
//   kpng cleanup kube-proxy
// The work is in src/kube-proxy-compat/ and src/host/kube-proxy-leftovers/.

import { readFileSync, writeFileSync } from "node:fs";
import type { Command } from "commander";
import { removeKubeProxyLeftovers } from "../host/kube-proxy-leftovers/cleanup.ts";
import { ExecCommandRunner } from "../host/kube-proxy-leftovers/command.ts";
import { runKubeProxyCommand } from "../kube-proxy-compat/command.ts";
import { KUBE_PROXY_FLAGS } from "../kube-proxy-compat/flags.ts";
import type { RunContext } from "../plugin/contracts.ts";
import { UsageError } from "../plugin/usage-error.ts";

/**
 * Runs argv if it is one of the kube-proxy forms and resolves true; resolves false otherwise.
 * `program()` builds a fresh kpng command tree; `run` parses and runs a kpng command line.
 */
export async function runKubeProxyForms(
  argv: readonly string[],
  ctx: RunContext,
  program: () => Command,
  run: (argv: readonly string[]) => Promise<void>,
): Promise<boolean> {
  const cleanup = async () => {
    const report = await removeKubeProxyLeftovers(
      new ExecCommandRunner(),
      ctx.log.child({ component: "cleanup" }),
    );
    if (report.failures.length > 0)
      throw new Error(`kube-proxy cleanup failed: ${report.failures.join("; ")}`);
  };
  if (argv[0] === "cleanup" && argv[1] === "kube-proxy") {
    if (argv.length > 2)
      throw new UsageError(`cleanup kube-proxy takes no arguments (got ${argv.slice(2).join(" ")})`);
    await cleanup();
    return true;
  }
  if (argv[0] !== "kube-proxy") return false;
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(kubeProxyUsage());
    return true;
  }
  const root = program();
  await runKubeProxyCommand(argv.slice(1), {
    log: ctx.log.child({ component: "kube-proxy-compat" }),
    readFile: (path) => readFileSync(path, "utf8"),
    accepts: (plugin, flag) => acceptsFlag(root, plugin, flag),
    runKpng: run,
    cleanup,
    setOomScoreAdj: (value) => writeFileSync("/proc/self/oom_score_adj", String(value)),
    // KPNG_LOG_LEVEL, when set, wins over the configuration's verbosity.
    setLogLevel: (level) => {
      if (process.env.KPNG_LOG_LEVEL === undefined) ctx.log.level = level;
    },
  });
  return true;
}

/** Whether `kpng kube … to-local <sink>` (or the kube source itself) has the flag. */
export function acceptsFlag(root: Command, plugin: string, flag: string): boolean {
  const child = (cmd: Command | undefined, name: string) => cmd?.commands.find((c) => c.name() === name);
  const kube = child(root, "kube");
  const cmd = plugin === "kube" ? kube : child(child(kube, "to-local"), plugin);
  return cmd?.options.some((o) => o.long === flag) ?? false;
}

function kubeProxyUsage(): string {
  const flags = Object.keys(KUBE_PROXY_FLAGS).map((f) => `--${f}`);
  return [
    "Usage: kpng kube-proxy [--config FILE] [kube-proxy flags]",
    "",
    "Runs kpng in place of kube-proxy: reads a KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1)",
    "and kube-proxy's flags (which override the file), then runs the kube source with the backend of",
    "its mode. --cleanup removes what kube-proxy left in the kernel and exits.",
    "Every field and flag, and what kpng does with it: docs/kube-proxy-compat.md",
    "",
    `Flags: ${flags.join(" ")}`,
    "",
  ].join("\n");
}
