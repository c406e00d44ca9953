// Wiring for the kube-proxy drop-in forms, which take kube-proxy's own flags rather than kpng's:
//   kpng kube-proxy [--config FILE] [kube-proxy flags]
//   kpng cleanup kube-proxy
//   kpng cleanup all          (kpng's own objects, every backend: see cleanup-all.ts)
// The work is in src/kube-proxy-compat/ and src/host/kube-proxy-leftovers/.

import { readFileSync, unwatchFile, watchFile, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import type { Command } from "commander";
import { removeKubeProxyLeftovers } from "../host/kube-proxy-leftovers/cleanup.ts";
import { ExecCommandRunner } from "../host/kube-proxy-leftovers/command.ts";
import { runKubeProxyCommand } from "../kube-proxy-compat/command.ts";
import { KUBE_PROXY_FLAGS } from "../kube-proxy-compat/flags.ts";
import type { Translation } from "../kube-proxy-compat/translate.ts";
import { readBoundedFile } from "../lib/bounded-read.ts";
import { applySysctls, conntrackSysctls, ProcSysctlFiles } from "../node/conntrack/sysctls.ts";
import { publishComponentDocuments } from "../node/metrics-server.ts";
import { parseNodeServicesOptions } from "../node/options.ts";
import type { Logger } from "../observability/log.ts";
import type { RunContext } from "../plugin/contracts.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { cleanupAll } from "./cleanup-all.ts";
import { localSinks } from "./plugins.ts";

/** kube-proxy's configuration is a few kilobytes; this much is already a wrong file. */
const MAX_CONFIG_BYTES = 1024 * 1024;

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
  if (argv[0] === "cleanup" && argv[1] === "all") {
    if (argv.length > 2)
      throw new UsageError(`cleanup all takes no arguments (got ${argv.slice(2).join(" ")})`);
    await cleanupAll(localSinks, { ...ctx, log: ctx.log.child({ component: "cleanup" }) });
    return true;
  }
  if (argv[0] !== "kube-proxy") return false;
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(kubeProxyUsage());
    return true;
  }
  const root = program();
  const log = ctx.log.child({ component: "kube-proxy-compat" });
  await runKubeProxyCommand(argv.slice(1), {
    log,
    version: packageVersion(),
    readFile: async (path) => (await readBoundedFile(path, MAX_CONFIG_BYTES)).toString("utf8"),
    writeFile: (path, text) => writeFileSync(path, text),
    print: (text) => process.stdout.write(text),
    initOnly: (t) => initOnly(t, log),
    // Polling follows the ConfigMap's symlink swaps, which inotify on the path would miss.
    watchFile: (path, onChange) => {
      const listener = () => onChange();
      watchFile(path, { interval: CONFIG_POLL_MS, persistent: false }, listener);
      return () => unwatchFile(path, listener);
    },
    publish: publishComponentDocuments,
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

const CONFIG_POLL_MS = 2000;

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    version?: string;
  };
  return pkg.version ?? "unknown";
}

/** kube-proxy's --init-only: the privileged set-up (here, the conntrack sysctls), then exit. */
async function initOnly(t: Translation, log: Logger): Promise<void> {
  const camel = (flag: string) => flag.slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
  const node = parseNodeServicesOptions(
    Object.fromEntries(t.sink.options.map((o) => [camel(o.flag), o.value])),
  );
  const written = await applySysctls(
    conntrackSysctls(node.conntrack, availableParallelism()),
    new ProcSysctlFiles(),
    log,
  );
  log.info({ written }, "initialised; exiting (--init-only)");
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
    "or kube-proxy's flags (ignored, as by kube-proxy, when --config is given, except --hostname-override",
    "and the logging flags), then runs the kube source with the backend of its mode. --cleanup removes what",
    "kube-proxy left in the kernel and exits; --version, --write-config-to and --init-only exit too.",
    "Every field and flag, and what kpng does with it: docs/kube-proxy-compat.md",
    "",
    `Flags: ${flags.join(" ")}`,
    "",
  ].join("\n");
}
