// The credentials of each API request, with a deadline.

import type { RequestOptions } from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";

/**
 * How long the credentials may take. A kubeconfig `exec` plugin (a cloud CLI, a vault client) is
 * run by client-node without a deadline: a hung one stalled the kube source silently, and neither
 * --list-timeout nor the watch deadline covers it.
 */
const CREDENTIALS_TIMEOUT_MS = 30_000;

/** config.applyToHTTPSOptions within a deadline; the error names the exec plugin that hung. */
export async function applyCredentials(
  config: KubeConfig,
  options: RequestOptions,
  timeoutMs = CREDENTIALS_TIMEOUT_MS,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const exec = (config.getCurrentUser()?.exec as { command?: unknown } | undefined)?.command;
      const what =
        typeof exec === "string" ? `the kubeconfig's exec credential plugin (${exec})` : "the credentials";
      reject(new Error(`${what} did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  try {
    await Promise.race([config.applyToHTTPSOptions(options), deadline]);
  } finally {
    clearTimeout(timer);
  }
}
