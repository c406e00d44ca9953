// `kpng kube-proxy [--config FILE] [kube-proxy flags]`: reads kube-proxy's configuration and
// flags, reports what does not carry over, and runs the matching kpng command line. With
// `--cleanup` it removes kube-proxy's leftovers instead, as `kube-proxy --cleanup` does.

import type { Logger } from "../observability/log.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { toKpngArgv } from "./argv.ts";
import { readKubeProxyConfig } from "./config-file.ts";
import { parseKubeProxyFlags } from "./flags.ts";
import { translate } from "./translate.ts";

export interface KubeProxyCommandDeps {
  readonly log: Logger;
  /** The text of a file, bounded (a device or FIFO is refused, so is a file over the limit). */
  readFile(path: string): Promise<string>;
  /** Whether the plug-in ("kube", "to-nft", …) has the flag in this build. */
  accepts(plugin: string, flag: string): boolean;
  /** Runs a kpng command line, e.g. ["kube", …, "to-local", "to-nft", …]. */
  runKpng(argv: readonly string[]): Promise<void>;
  /** Removes kube-proxy's leftovers (`kpng cleanup kube-proxy`). */
  cleanup(): Promise<void>;
  setOomScoreAdj(value: number): void;
  setLogLevel(level: string): void;
}

export async function runKubeProxyCommand(
  args: readonly string[],
  deps: KubeProxyCommandDeps,
): Promise<void> {
  const flags = parseKubeProxyFlags(args);
  if (flags.cleanup) {
    await deps.cleanup();
    return;
  }
  let fileValues: ReadonlyMap<string, unknown> = new Map();
  if (flags.configFile !== undefined) {
    let text: string;
    try {
      text = await deps.readFile(flags.configFile);
    } catch (err) {
      throw new UsageError(`--config: cannot read ${flags.configFile}: ${(err as Error).message}`);
    }
    const read = readKubeProxyConfig(text, flags.configFile);
    for (const w of read.warnings) deps.log.warn(w);
    fileValues = read.values;
  }
  const t = translate(fileValues, flags);
  deps.setLogLevel(t.logLevel);
  for (const w of t.warnings) deps.log.warn(w);
  const { argv, unavailable } = toKpngArgv(t, deps.accepts);
  for (const o of unavailable) {
    const what = { option: o.flag, value: o.value, from: o.from };
    if (o.defaulted)
      deps.log.info(what, "kube-proxy default not applied: this kpng build has no such option yet");
    else deps.log.warn(what, "not applied: this kpng build has no such option yet");
  }
  try {
    deps.setOomScoreAdj(t.oomScoreAdj);
  } catch (err) {
    deps.log.warn({ oomScoreAdj: t.oomScoreAdj, err: (err as Error).message }, "could not set oom_score_adj");
  }
  deps.log.info({ mode: t.mode, argv }, "running as kube-proxy");
  await deps.runKpng(argv);
}
