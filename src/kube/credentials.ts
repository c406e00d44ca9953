// The credentials of each API request, with a deadline.

import type { RequestOptions } from "node:https";

/**
 * How long the credentials may take. A kubeconfig `exec` plugin (a cloud CLI, a vault client) is
 * run by client-node without a deadline: a hung one stalled the kube source silently, and neither
 * --list-timeout nor the watch deadline covers it.
 */
const CREDENTIALS_TIMEOUT_MS = 30_000;

/**
 * Server and credentials of the API connection: a client-node KubeConfig, or, without a
 * kubeconfig file, a PlainConnection (service-account.ts).
 */
export interface ApiConnection {
  getCurrentCluster(): { readonly server: string } | null;
  getCurrentUser(): { readonly exec?: unknown } | null;
  applyToHTTPSOptions(options: RequestOptions): Promise<void>;
}

/** config.applyToHTTPSOptions within a deadline; the error names the exec plugin that hung. */
export async function applyCredentials(
  config: ApiConnection,
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
