// The flags that say how to reach the API server, and how fast, shared by the kube source and the
// controllers: declared once, and checked by zod fields every such command puts in its schema.

import type { Command } from "commander";
import { z } from "zod";
import { optionalText, wholeNumberFlag } from "../plugin/options.ts";

/** client-go's defaults, used when qps or burst is 0. */
export const DEFAULT_QPS = 5;
export const DEFAULT_BURST = 10;

/** The client-side rate limit of requests to the API server (rate-limit.ts applies it). */
export interface RateLimit {
  /** Requests per second; 0: the default (5); negative: no limit, as client-go. */
  readonly qps: number;
  /** Requests that may go at once; 0: the default (10). */
  readonly burst: number;
}

/** How to reach the API server: every command that talks to it takes these. */
export function addKubeConnectionOptions(cmd: Command): void {
  cmd
    .option(
      "--kubeconfig <file>",
      "kubeconfig file (default: $KUBECONFIG, the pod's service account, ~/.kube/config)",
    )
    .option("--context <name>", "kubeconfig context to use (default: current-context)")
    .option("--master <url>", "API server URL; overrides the kubeconfig's server");
}

/** The client-side rate limit's flags, kube-proxy's names; `defaults` differ by command. */
export function addKubeRateLimitOptions(cmd: Command, defaults: RateLimit): void {
  cmd
    .option(
      "--kube-api-qps <qps>",
      `requests per second to the API server once the burst is spent (0: ${DEFAULT_QPS}; negative: no limit)`,
      String(defaults.qps),
    )
    .option(
      "--kube-api-burst <count>",
      `requests to the API server that may go at once (0: ${DEFAULT_BURST})`,
      String(defaults.burst),
    );
}

/** A number flag, fractions and negatives allowed: commander hands text, the kube-proxy translation numbers. */
const numberFlag = (fallback: number) =>
  z
    .union([z.string(), z.number()])
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return fallback;
      const n = typeof v === "number" ? v : v.trim() === "" ? Number.NaN : Number(v);
      if (Number.isFinite(n)) return n;
      ctx.addIssue({
        code: "custom",
        message: `"${String(v)}" is not a number of requests per second, e.g. 5 or 2.5`,
      });
      return z.NEVER;
    });

/** The zod fields of addKubeConnectionOptions' flags (commander's names), for a command's schema. */
export const kubeConnectionFlags = {
  kubeconfig: optionalText,
  context: optionalText,
  master: optionalText,
};

/** The zod fields of addKubeRateLimitOptions' flags, with the same defaults. */
export function kubeRateLimitFlags(defaults: RateLimit) {
  return {
    kubeApiQps: numberFlag(defaults.qps),
    kubeApiBurst: wholeNumberFlag(defaults.burst, 0, "requests"),
  };
}
