// The API server connections that need no kubeconfig: a pod's service account, and --master alone
// (anonymous). The Kubernetes client library costs a process much memory (docs/performance.md),
// so these two cases, which are how kpng and the fallback controller run in a cluster, do
// without it.

import { readFile } from "node:fs/promises";
import type { RequestOptions } from "node:https";
import type { ApiConnection } from "./credentials.ts";

const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
export const SERVICE_ACCOUNT_TOKEN = `${SERVICE_ACCOUNT_DIR}/token`;
const SERVICE_ACCOUNT_CA = `${SERVICE_ACCOUNT_DIR}/ca.crt`;

/**
 * A server with an optional bearer token file and CA file. Both files are read on every request,
 * as the kubelet rotates the projected service-account token in place.
 */
export class PlainConnection implements ApiConnection {
  readonly #server: string;
  readonly #tokenFile: string | undefined;
  readonly #caFile: string | undefined;

  constructor(server: string, files: { tokenFile?: string; caFile?: string } = {}) {
    this.#server = server;
    this.#tokenFile = files.tokenFile;
    this.#caFile = files.caFile;
  }

  getCurrentCluster(): { readonly server: string } {
    return { server: this.#server };
  }

  getCurrentUser(): null {
    return null;
  }

  async applyToHTTPSOptions(options: RequestOptions): Promise<void> {
    if (this.#caFile !== undefined) options.ca = await readFile(this.#caFile);
    if (this.#tokenFile !== undefined) {
      const token = (await readFile(this.#tokenFile, "utf8")).trim();
      options.headers = { ...options.headers, Authorization: `Bearer ${token}` };
    }
  }
}

export function serviceAccountConnection(server: string): PlainConnection {
  return new PlainConnection(server, { tokenFile: SERVICE_ACCOUNT_TOKEN, caFile: SERVICE_ACCOUNT_CA });
}
