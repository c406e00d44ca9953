// Where the API server and credentials come from, in kube-proxy's order: --kubeconfig, then
// $KUBECONFIG, then the pod's service account, then ~/.kube/config; --master overrides the server
// (and alone is enough for an unauthenticated server). The Kubernetes client library is loaded
// only to read a kubeconfig file: the service account and --master alone do without its memory.

import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Cluster, KubeConfig } from "@kubernetes/client-node";
import { parse } from "yaml";
import type { ApiConnection } from "./credentials.ts";
import { PlainConnection, SERVICE_ACCOUNT_TOKEN, serviceAccountConnection } from "./service-account.ts";

const require = createRequire(import.meta.url);

function newKubeConfig(): KubeConfig {
  const { KubeConfig } = require("@kubernetes/client-node") as typeof import("@kubernetes/client-node");
  return new KubeConfig();
}

export interface ConnectionOptions {
  readonly kubeconfig?: string | undefined;
  readonly context?: string | undefined;
  readonly master?: string | undefined;
}

/** What the loader reads from the machine; tests pass their own. */
export interface Environment {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly fileExists: (path: string) => boolean;
  readonly homeDir: string;
}

export const processEnvironment: Environment = {
  env: process.env,
  fileExists: existsSync,
  homeDir: homedir(),
};

export interface LoadedConfig {
  readonly config: ApiConnection;
  /** Where it came from, for the startup log line. */
  readonly origin: string;
}

function inPod(environment: Environment): boolean {
  return (
    environment.env.KUBERNETES_SERVICE_HOST !== undefined && environment.fileExists(SERVICE_ACCOUNT_TOKEN)
  );
}

interface LoadedKubeConfig {
  readonly config: KubeConfig;
  readonly origin: string;
}

function loadBase(options: ConnectionOptions, environment: Environment): LoadedKubeConfig | undefined {
  const config = newKubeConfig();
  if (options.kubeconfig) {
    if (!environment.fileExists(options.kubeconfig)) {
      throw new Error(`--kubeconfig: file ${options.kubeconfig} does not exist`);
    }
    loadFile(config, options.kubeconfig);
    return { config, origin: options.kubeconfig };
  }
  const fromEnv = environment.env.KUBECONFIG;
  if (fromEnv) {
    const [first, ...more] = fromEnv.split(":").filter((f) => f !== "");
    if (first === undefined || !environment.fileExists(first)) {
      throw new Error(`$KUBECONFIG: file ${first ?? fromEnv} does not exist`);
    }
    loadFile(config, first);
    for (const file of more) {
      if (!environment.fileExists(file)) continue;
      const extra = newKubeConfig();
      loadFile(extra, file);
      config.mergeConfig(extra, true);
    }
    return { config, origin: `$KUBECONFIG (${fromEnv})` };
  }
  const home = join(environment.homeDir, ".kube", "config");
  if (environment.fileExists(home)) {
    loadFile(config, home);
    return { config, origin: home };
  }
  return undefined;
}

/**
 * Loads a kubeconfig file. A user's `tokenFile` (client-go's field, which kubeadm writes into
 * kube-proxy's kubeconfig.conf) is not read by client-node: it becomes client-node's token-file
 * provider, which re-reads the file as the in-cluster config does, so rotated tokens are used.
 */
function loadFile(config: KubeConfig, path: string): void {
  config.loadFromFile(path);
  const raw = parse(readFileSync(path, "utf8")) as {
    users?: { name?: unknown; user?: Record<string, unknown> }[];
  };
  const tokenFiles = new Map<string, string>();
  for (const u of Array.isArray(raw?.users) ? raw.users : []) {
    const file = u?.user?.tokenFile;
    if (typeof u?.name === "string" && typeof file === "string" && file !== "" && !u.user?.token) {
      tokenFiles.set(u.name, file);
    }
  }
  if (tokenFiles.size === 0) return;
  config.loadFromOptions({
    clusters: config.getClusters(),
    contexts: config.getContexts(),
    currentContext: config.getCurrentContext(),
    users: config.getUsers().map((u) => {
      const file = tokenFiles.get(u.name);
      return file === undefined
        ? u
        : { ...u, authProvider: { name: "tokenFile", config: { tokenFile: file } } };
    }),
  });
}

/**
 * client-node refuses plain http:// servers unless TLS verification is "skipped"; there is no TLS
 * to verify on http://, so mark those clusters accordingly (https:// clusters are left alone).
 */
function allowPlainHttp(cluster: Cluster): Cluster {
  return cluster.server.startsWith("http:") ? { ...cluster, skipTLSVerify: true } : cluster;
}

/** The pod's service account when no kubeconfig is given; the address comes from the environment. */
function inClusterConnection(options: ConnectionOptions, environment: Environment): LoadedConfig {
  if (options.context !== undefined) {
    throw new Error("--context: in a pod without a kubeconfig there are no contexts to choose from");
  }
  const host = environment.env.KUBERNETES_SERVICE_HOST ?? "";
  const port = environment.env.KUBERNETES_SERVICE_PORT ?? "443";
  const server = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
  return { config: serviceAccountConnection(server), origin: "in-cluster service account" };
}

function hasKubeconfigFile(options: ConnectionOptions, environment: Environment): boolean {
  return (
    Boolean(options.kubeconfig) ||
    Boolean(environment.env.KUBECONFIG) ||
    environment.fileExists(join(environment.homeDir, ".kube", "config"))
  );
}

export function loadKubeConfig(options: ConnectionOptions, environment = processEnvironment): LoadedConfig {
  if (
    !options.kubeconfig &&
    !environment.env.KUBECONFIG &&
    options.master === undefined &&
    inPod(environment)
  ) {
    return inClusterConnection(options, environment);
  }
  if (!hasKubeconfigFile(options, environment)) {
    if (options.master === undefined) {
      throw new Error(
        "no API server configured: pass --kubeconfig or --master, set $KUBECONFIG, or run in a pod with a service account",
      );
    }
    // Anonymous: no kubeconfig, so no credentials; https:// verifies against the system's CAs.
    return { config: new PlainConnection(options.master), origin: `--master ${options.master}` };
  }
  const base = loadBase(options, environment);
  if (!base) throw new Error("no kubeconfig found"); // hasKubeconfigFile said there is one
  const { config } = base;
  if (options.context !== undefined) {
    if (!config.getContextObject(options.context)) {
      const known = config.getContexts().map((c) => c.name);
      throw new Error(
        `--context: no context ${JSON.stringify(options.context)} in ${base.origin} (has: ${known.join(", ")})`,
      );
    }
    config.setCurrentContext(options.context);
  }
  const current = config.getCurrentCluster();
  if (!current) throw new Error(`${base.origin}: the current context names no cluster`);
  const server = options.master ?? current.server;
  config.loadFromOptions({
    clusters: config
      .getClusters()
      .map((c) => (c.name === current.name ? allowPlainHttp({ ...c, server }) : allowPlainHttp(c))),
    contexts: config.getContexts(),
    users: config.getUsers(),
    currentContext: config.getCurrentContext(),
  });
  return {
    config,
    origin: options.master === undefined ? base.origin : `${base.origin} with --master ${server}`,
  };
}
