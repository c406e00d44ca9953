// run(): the whole main() of a standalone backend. Parses the standard flags (--api,
// --node-name, --once, --tls-*), watches the node's local state, calls the handler with every
// service after each change, and stops cleanly on SIGINT/SIGTERM.

import { hostname } from "node:os";
import { Command, CommanderError } from "commander";
import type { LocalService, LocalState } from "../model/local.ts";
import { componentLogger } from "../observability/log.ts";
import { parseOptionsWith } from "../plugin/options.ts";
import { UsageError } from "../plugin/usage-error.ts";
import type { TlsPaths } from "./connection.ts";
import { remoteLocalStateFeed } from "./feed.ts";
import { fullStateSink } from "./fullstate.ts";
import { addApiOptions, apiClientFlags } from "./tls-options.ts";

type RunHandler = (services: readonly LocalService[], state: LocalState) => void | Promise<void>;

interface RunOptions {
  /** Defaults to process.argv. */
  readonly argv?: readonly string[];
  readonly name?: string;
  /** Defaults to an abort on SIGINT/SIGTERM. */
  readonly signal?: AbortSignal;
}

/** Bad command-line flags: the message says which and why. */
export { UsageError };

/** Parses and checks the standard flags; throws a UsageError instead of exiting. */
export function parseRunFlags(
  argv: readonly string[],
  name = "backend",
): { api: string; nodeName: string; once: boolean; tls: TlsPaths } {
  const cmd = new Command(name)
    .description("a kpng backend: watches one node's local state from a kpng brain")
    .option("--node-name <name>", "the node whose local state is watched", hostname())
    .option("--once", "handle the first complete state, then exit")
    .exitOverride()
    // The error comes back as a UsageError; the caller decides how to show it.
    .configureOutput({ outputError: () => {} });
  addApiOptions(cmd);
  try {
    cmd.parse([...argv]);
  } catch (err) {
    if (err instanceof CommanderError && err.code === "commander.helpDisplayed") process.exit(0);
    if (err instanceof CommanderError) throw new UsageError(err.message.replace(/^error: /, ""));
    throw err;
  }
  const opts = cmd.opts<Record<string, unknown>>();
  const nodeName = opts.nodeName as string;
  if (nodeName === "") throw new UsageError("--node-name must not be empty");
  const { api, tls } = parseOptionsWith(apiClientFlags, opts);
  return { api, nodeName, once: opts.once === true, tls };
}

export async function run(handler: RunHandler, options: RunOptions = {}): Promise<void> {
  const flags = parseRunFlags(options.argv ?? process.argv, options.name);

  const stop = new AbortController();
  const onSignal = () => stop.abort();
  if (options.signal === undefined) {
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  }
  const signal = options.signal === undefined ? stop.signal : AbortSignal.any([stop.signal, options.signal]);
  const feed = remoteLocalStateFeed({
    api: flags.api,
    nodeName: flags.nodeName,
    tls: flags.tls,
    signal,
    log: componentLogger("client"),
  });
  try {
    await new Promise<void>((resolve, reject) => {
      const unsubscribe = fullStateSink(feed, async (services, state) => {
        try {
          await handler(services, state);
        } catch (err) {
          reject(err);
          return;
        }
        if (flags.once) stop.abort();
      });
      signal.addEventListener(
        "abort",
        () => {
          unsubscribe();
          resolve();
        },
        { once: true },
      );
    });
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    stop.abort();
  }
}
