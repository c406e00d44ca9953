// What the fallback e2e tests share: the controller as a process, waiting with a deadline, the
// test API server's view of the Lease and the slices, and what a stock kube-proxy would program
// from those slices.

import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { endpointSlice, node, service } from "../../apiserver/fixtures.ts";
import { TestApiServer } from "../../apiserver/server.ts";
import type { RawObject } from "../../apiserver/store.ts";

const MAIN = join(import.meta.dirname, "..", "..", "..", "src", "cli", "main.ts");

export const LEASE = { duration: 2000, renew: 1500, retry: 200 };

export function report(line: string): void {
  process.stdout.write(`# ${line}\n`);
}

/** A free-ish port for a controller's metrics: random, so parallel test files rarely collide. */
export function metricsPort(): number {
  return 20_000 + Math.floor(Math.random() * 20_000);
}

export class ControllerProcess {
  stderr = "";
  readonly port: number;
  readonly #child: ChildProcess;
  readonly exited: Promise<number | null>;
  constructor(master: string, port: number, extra: readonly string[] = []) {
    this.port = port;
    this.#child = spawn(
      process.execPath,
      [
        MAIN,
        "fallback-controller",
        "--master",
        master,
        "--leader-elect-namespace",
        "kube-system",
        "--leader-elect-lease-duration",
        `${LEASE.duration}ms`,
        "--leader-elect-renew-deadline",
        `${LEASE.renew}ms`,
        "--leader-elect-retry-period",
        `${LEASE.retry}ms`,
        "--metrics-address",
        `127.0.0.1:${port}`,
        ...extra,
      ],
      { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, KUBECONFIG: "", HOME: "/nonexistent" } },
    );
    this.#child.stderr!.setEncoding("utf8").on("data", (t: string) => {
      this.stderr += t;
    });
    this.exited = new Promise((resolve) => this.#child.on("exit", (code) => resolve(code)));
  }
  kill(signal: NodeJS.Signals): void {
    if (this.#child.exitCode === null) this.#child.kill(signal);
  }
  async get(path: string): Promise<{ status: number; text: string }> {
    const res = await fetch(`http://127.0.0.1:${this.port}${path}`, { signal: AbortSignal.timeout(2000) });
    return { status: res.status, text: await res.text() };
  }
}

/** Waits for a condition with a deadline; returns how long it took. */
export async function until(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<number> {
  const started = Date.now();
  for (;;) {
    try {
      if (await condition()) return Date.now() - started;
    } catch {
      // not yet
    }
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function holder(api: TestApiServer): string {
  const lease = api.get("Lease", "kube-system/kpng-fallback-controller") as unknown as
    | { spec?: { holderIdentity?: string } }
    | undefined;
  return lease?.spec?.holderIdentity ?? "";
}

interface RawEndpoint {
  addresses: string[];
  conditions?: { ready?: boolean | null; serving?: boolean | null; terminating?: boolean | null };
}
export type RawSlice = RawObject & { kind: string; ports?: { port?: number }[]; endpoints: RawEndpoint[] };

export function slicesOf(api: TestApiServer, service: string, namespace = "default"): RawSlice[] {
  return api.store
    .snapshot("endpointslices", api.store.currentRv)
    .filter(
      (s) =>
        s.metadata.namespace === namespace && s.metadata.labels?.["kubernetes.io/service-name"] === service,
    ) as RawSlice[];
}

export function fallbackSlicesOf(api: TestApiServer, service: string): RawSlice[] {
  return slicesOf(api, service).filter(
    (s) => s.metadata.labels?.["endpointslice.kubernetes.io/managed-by"] === "fallback.kpng.io",
  );
}

export function activeLabels(api: TestApiServer, service: string): string {
  return fallbackSlicesOf(api, service)
    .map((s) => s.metadata.labels?.["fallback.kpng.io/active"] ?? "")
    .sort()
    .join();
}

/**
 * The endpoints ("ip:port") a stock kube-proxy programs for a Service with traffic policy Cluster,
 * reading every slice of it and knowing nothing of fallback: the ready endpoints; when none is
 * ready, the serving-and-terminating ones (KEP-1669); unset ready/serving read as true.
 */
export function stockView(api: TestApiServer, service: string): string[] {
  const all = slicesOf(api, service).flatMap((s) =>
    s.endpoints.map((e) => ({ e, port: s.ports?.[0]?.port ?? 0 })),
  );
  const ready = all.filter(({ e }) => e.conditions?.ready ?? true);
  const chosen =
    ready.length > 0
      ? ready
      : all.filter(
          ({ e }) => (e.conditions?.serving ?? e.conditions?.ready ?? true) && e.conditions?.terminating,
        );
  return chosen.flatMap(({ e, port }) => e.addresses.map((a) => `${a}:${port}`)).sort();
}

/** Records a view every few ms while a test runs, to check it was never mixed at any moment. */
export class Sampler {
  readonly seen: string[][] = [];
  readonly #timer: NodeJS.Timeout;
  constructor(view: () => string[], everyMs = 10) {
    this.#timer = setInterval(() => this.seen.push(view()), everyMs);
  }
  stop(): void {
    clearInterval(this.#timer);
  }
  /** The samples that hold both an address of `a` and one of `b`. */
  mixed(a: readonly string[], b: readonly string[]): string[][] {
    return this.seen.filter((v) => v.some((x) => a.includes(x)) && v.some((x) => b.includes(x)));
  }
}

/**
 * A test API server with node-1, Service default/web (fallback selector app=sorry-page, the
 * given return delay), its primary slice web-abc with 203.0.113.5 ready, and a ready fallback pod
 * sorry-1 at 203.0.113.50 serving "http" on `port`.
 */
export async function startWebCluster(returnDelay: string): Promise<TestApiServer> {
  const api = await TestApiServer.start({ bookmarkIntervalMs: 500 });
  api.create(node("node-1"));
  const web = service("web");
  web.metadata.annotations = {
    "fallback.kpng.io/selector": "app=sorry-page",
    "fallback.kpng.io/return-delay": returnDelay,
  };
  api.create(web);
  api.create(endpointSlice("web-abc", "web", { addresses: ["203.0.113.5"] }));
  api.create(sorryPod("sorry-1", "203.0.113.50"));
  return api;
}

export function sorryPod(name: string, ip: string, port = 8080): RawObject & { kind: string } {
  return {
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { app: "sorry-page" } },
    spec: { nodeName: "node-1", containers: [{ name: "c", ports: [{ name: "http", containerPort: port }] }] },
    status: { phase: "Running", podIPs: [{ ip }], conditions: [{ type: "Ready", status: "True" }] },
  };
}

/** Sets the readiness of web's primary endpoint. */
export function setPrimaryReady(api: TestApiServer, ready: boolean): void {
  const slice = api.get("EndpointSlice", "default/web-abc") as RawObject & {
    kind: string;
    endpoints: { conditions: unknown }[];
  };
  slice.endpoints[0]!.conditions = { ready, serving: ready, terminating: false };
  api.update(slice);
}
