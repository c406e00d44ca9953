// `kpng kube-proxy [--config FILE] [kube-proxy flags]`: reads kube-proxy's configuration and
// flags, reports what does not carry over, and runs the matching kpng command line. With
// `--cleanup` it removes kube-proxy's leftovers instead, as `kube-proxy --cleanup` does; the
// other housekeeping flags (`--version`, `--write-config-to`, `--init-only`) also exit at once.
// While it runs, a change of the --config file ends it (exit 1), so the pod restarts with the
// new ConfigMap, as kube-proxy does.

import { stringify } from "yaml";
import type { Logger } from "../observability/log.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { toKpngArgv } from "./argv.ts";
import { readKubeProxyConfig } from "./config-file.ts";
import { parseKubeProxyFlags } from "./flags.ts";
import { API_VERSION, KIND } from "./table.ts";
import { type Translation, translate } from "./translate.ts";

export interface KubeProxyCommandDeps {
  readonly log: Logger;
  readonly version: string;
  /** The text of a file, bounded (a device or FIFO is refused, so is a file over the limit). */
  readFile(path: string): Promise<string>;
  writeFile(path: string, text: string): void;
  print(text: string): void;
  /** Whether the plug-in ("kube", "to-nft", …) has the flag in this build. */
  accepts(plugin: string, flag: string): boolean;
  /** Runs a kpng command line, e.g. ["kube", …, "to-local", "to-nft", …]. */
  runKpng(argv: readonly string[]): Promise<void>;
  /** Removes kube-proxy's leftovers (`kpng cleanup kube-proxy`). */
  cleanup(): Promise<void>;
  /** `--init-only`: the privileged set-up, then exit. */
  initOnly(t: Translation): Promise<void>;
  /** Calls onChange once when the file's content changes; returns a stop function. */
  watchFile(path: string, onChange: () => void): () => void;
  /** The effective configuration and the flags, for /configz and /flagz. */
  publish(config: Readonly<Record<string, unknown>>, flags: readonly string[]): void;
  setOomScoreAdj(value: number): void;
  setLogLevel(level: string): void;
}

export async function runKubeProxyCommand(
  args: readonly string[],
  deps: KubeProxyCommandDeps,
): Promise<void> {
  const flags = parseKubeProxyFlags(args);
  if (flags.version) {
    deps.print(`kpng ${deps.version} (kube-proxy compatible: kpng kube-proxy)\n`);
    return;
  }
  if (flags.cleanup) {
    await deps.cleanup();
    return;
  }
  let fileValues: ReadonlyMap<string, unknown> = new Map();
  let fileText = "";
  if (flags.configFile !== undefined) {
    try {
      fileText = await deps.readFile(flags.configFile);
    } catch (err) {
      throw new UsageError(`--config: cannot read ${flags.configFile}: ${(err as Error).message}`);
    }
    const read = readKubeProxyConfig(fileText, flags.configFile);
    for (const w of read.warnings) deps.log.warn(w);
    fileValues = read.values;
  }
  if (flags.ignored.length > 0)
    deps.log.warn({ flags: flags.ignored }, "flags ignored because --config is given (as kube-proxy)");
  const t = translate(fileValues, flags);
  deps.setLogLevel(t.logLevel);
  for (const w of t.warnings) deps.log.warn(w);
  if (flags.writeConfigTo !== undefined) {
    deps.writeFile(flags.writeConfigTo, stringify(configDocument(t.effective)));
    deps.log.info({ file: flags.writeConfigTo }, "wrote the configuration");
    return;
  }
  if (flags.initOnly) {
    await deps.initOnly(t);
    return;
  }
  const { argv, unavailable } = toKpngArgv(t, deps.accepts);
  for (const o of unavailable) {
    const what = { option: o.flag, value: o.value, from: o.from };
    if (o.defaulted)
      deps.log.info(what, "kube-proxy default not applied: this kpng build has no such option");
    else deps.log.warn(what, "not applied: this kpng build has no such option");
  }
  try {
    deps.setOomScoreAdj(t.oomScoreAdj);
  } catch (err) {
    deps.log.warn({ oomScoreAdj: t.oomScoreAdj, err: (err as Error).message }, "could not set oom_score_adj");
  }
  deps.publish(configDocument(t.effective), args);
  deps.log.info({ mode: t.mode, argv }, "running as kube-proxy");
  await runUntilConfigChanges(deps, flags.configFile, fileText, argv);
}

/** Runs kpng; a change of the config file ends the run with an error (so the pod restarts). */
async function runUntilConfigChanges(
  deps: KubeProxyCommandDeps,
  file: string | undefined,
  text: string,
  argv: readonly string[],
): Promise<void> {
  if (file === undefined) return deps.runKpng(argv);
  let stop = () => {};
  const changed = new Promise<never>((_, reject) => {
    stop = deps.watchFile(file, () => {
      void deps
        .readFile(file)
        .then(
          (now) => now,
          () => undefined,
        )
        .then((now) => {
          if (now === text) return;
          deps.log.error(
            { file },
            "the configuration file changed: exiting so that the new one is read at restart",
          );
          reject(new Error(`content of the configuration file ${file} was updated`));
        });
    });
  });
  try {
    await Promise.race([deps.runKpng(argv), changed]);
  } finally {
    stop();
  }
}

/** The effective configuration as a KubeProxyConfiguration document (dotted paths nested). */
function configDocument(effective: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const doc: Record<string, unknown> = { apiVersion: API_VERSION, kind: KIND };
  for (const [path, value] of Object.entries(effective)) {
    const keys = path.split(".");
    let at = doc;
    for (const k of keys.slice(0, -1)) {
      at[k] ??= {};
      at = at[k] as Record<string, unknown>;
    }
    at[keys[keys.length - 1] ?? path] = value;
  }
  return doc;
}
