// run(): the whole main() of a standalone backend. Parses the standard flags (--api,
// --node-name, --once, --tls-*), watches the node's local state, calls the handler with every
// service after each change, and stops cleanly on SIGINT/SIGTERM.

import { hostname } from "node:os";
import { Command } from "commander";
import type { LocalService, LocalState } from "../model/local.ts";
import { componentLogger } from "../observability/log.ts";
import { remoteLocalStateFeed } from "./feed.ts";
import { fullStateSink } from "./fullstate.ts";
import { addApiOptions, tlsFromOptions } from "./tls-options.ts";

export type RunHandler = (services: readonly LocalService[], state: LocalState) => void | Promise<void>;

export interface RunOptions {
  /** Defaults to process.argv. */
  readonly argv?: readonly string[];
  readonly name?: string;
  /** Defaults to an abort on SIGINT/SIGTERM. */
  readonly signal?: AbortSignal;
}

export async function run(handler: RunHandler, options: RunOptions = {}): Promise<void> {
  const cmd = new Command(options.name ?? "backend")
    .description("a kpng backend: watches one node's local state from a kpng brain")
    .option("--node-name <name>", "the node whose local state is watched", hostname())
    .option("--once", "handle the first complete state, then exit");
  addApiOptions(cmd);
  cmd.parse([...(options.argv ?? process.argv)]);
  const opts = cmd.opts<Record<string, unknown>>();

  const stop = new AbortController();
  const onSignal = () => stop.abort();
  if (options.signal === undefined) {
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  }
  const signal = options.signal === undefined ? stop.signal : AbortSignal.any([stop.signal, options.signal]);
  const feed = remoteLocalStateFeed({
    api: opts.api as string,
    nodeName: opts.nodeName as string,
    tls: tlsFromOptions(opts),
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
        if (opts.once === true) stop.abort();
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
