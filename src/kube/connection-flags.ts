// The flags that say how to reach the API server, shared by the kube source and the controllers:
// declared once, and checked by one set of zod fields every such command puts in its schema.

import type { Command } from "commander";
import { z } from "zod";
import { optionalText, wholeNumberFlag } from "../plugin/options.ts";
import { DEFAULT_BURST, DEFAULT_QPS } from "./rate-limit.ts";

/** How to reach the API server: every command that talks to it takes these. */
export function addKubeConnectionOptions(cmd: Command): void {
  cmd
    .option(
      "--kubeconfig <file>",
      "kubeconfig file (default: $KUBECONFIG, the pod's service account, ~/.kube/config)",
    )
    .option("--context <name>", "kubeconfig context to use (default: current-context)")
    .option("--master <url>", "API server URL; overrides the kubeconfig's server")
    .option(
      "--kube-api-qps <qps>",
      `requests per second to the API server once the burst is spent (0: ${DEFAULT_QPS}; negative: no limit)`,
      String(DEFAULT_QPS),
    )
    .option(
      "--kube-api-burst <count>",
      `requests to the API server that may go at once (0: ${DEFAULT_BURST})`,
      String(DEFAULT_BURST),
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
  kubeApiQps: numberFlag(DEFAULT_QPS),
  kubeApiBurst: wholeNumberFlag(DEFAULT_BURST, 0, "requests"),
};
