// The kpng command. Parses the command line (program.ts), runs it (run.ts), and turns the
// outcome into an exit code: 0 when the sink finished, 2 for a bad command line, 1 for anything else.
// main.ts, the executable, runs it.

import { CommanderError } from "commander";
import { stopAllCommands } from "../host/exec.ts";
import { rootLogger } from "../observability/log.ts";
import { UsageError } from "../plugin/usage-error.ts";
import type { Invocation } from "./invocation.ts";
import { runKubeProxyForms } from "./kube-proxy.ts";
import { joinSinkInvocations, sinkSegments } from "./multi-sink.ts";
import { controllers, globalSinks, localSinks, localSources, sources } from "./plugins.ts";
import { buildProgram } from "./program.ts";
import { runInvocation } from "./run.ts";

const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;
// A second signal while stopping means "now": the conventional 128 + SIGINT.
const EXIT_FORCED = 130;
/**
 * A stop is bounded whatever hangs (a kubelet waits 30 s, then kills): commands still running
 * this long after the signal are killed with their process groups, so their calls fail and the
 * sinks finish...
 */
const STOP_COMMANDS_AFTER_MS = 500;
/** ...and if the sink has still not finished, kpng exits anyway, within 5 s of the signal. */
const FORCED_EXIT_AFTER_MS = 4000;

function boundStop(): void {
  setTimeout(() => {
    const killed = stopAllCommands();
    if (killed > 0) rootLogger.warn({ commands: killed }, "stopping: killed commands still running");
  }, STOP_COMMANDS_AFTER_MS).unref();
  setTimeout(() => {
    rootLogger.error({ afterMs: FORCED_EXIT_AFTER_MS }, "stopping took too long; exiting now");
    stopAllCommands();
    process.exit(EXIT_FAILURE);
  }, FORCED_EXIT_AFTER_MS).unref();
}

/** Signals with no meaning for kpng: a stray one must not end a node's proxy silently. */
const IGNORED_SIGNALS = ["SIGUSR1", "SIGUSR2"] as const;
function onIgnoredSignal(signal: NodeJS.Signals): void {
  rootLogger.warn({ signal }, "ignoring signal (SIGTERM, SIGINT or SIGHUP stop kpng)");
}

export async function runCommand(argv: readonly string[]): Promise<number> {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (controller.signal.aborted) process.exit(EXIT_FORCED);
    rootLogger.info({ signal }, "stopping");
    controller.abort();
    boundStop();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  // kube-proxy ends on SIGHUP (Go's default); so do we, but cleanly and with a log line.
  process.on("SIGHUP", onSignal);
  for (const s of IGNORED_SIGNALS) process.on(s, onIgnoredSignal);
  const ctx = { signal: controller.signal, log: rootLogger };
  const program = () =>
    buildProgram(
      { sources, localSinks, globalSinks, localSources, controllers },
      (invocation) => runInvocation(invocation, ctx),
      // Commander has printed its message; we only choose the exit code.
      { configure: (root) => root.exitOverride() },
    );
  const run = async (words: readonly string[]) => {
    const segments = sinkSegments(
      words,
      localSinks.map((s) => s.name),
    );
    if (segments === undefined) {
      await program().parseAsync([...words], { from: "user" });
      return;
    }
    // Several sinks: every piece is checked before anything starts.
    const parsed: Invocation[] = [];
    for (const segment of segments) {
      await buildProgram(
        { sources, localSinks, globalSinks, localSources, controllers },
        async (invocation) => {
          parsed.push(invocation);
        },
        { configure: (root) => root.exitOverride() },
      ).parseAsync(segment, { from: "user" });
    }
    await runInvocation(joinSinkInvocations(parsed), ctx);
  };
  try {
    if (!(await runKubeProxyForms(argv, ctx, program, run))) await run(argv);
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT_USAGE;
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`kpng: ${err instanceof UsageError ? "error: " : ""}${message}\n`);
    return err instanceof UsageError ? EXIT_USAGE : EXIT_FAILURE;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    process.off("SIGHUP", onSignal);
    for (const s of IGNORED_SIGNALS) process.off(s, onIgnoredSignal);
  }
}
