// Runs `kpng … to-local to-json` as a child process and reads the local-state documents it prints.

import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";

const MAIN = join(import.meta.dirname, "..", "..", "..", "src", "cli", "main.ts");

export interface LocalServiceDoc {
  readonly namespace: string;
  readonly name: string;
  readonly ports: readonly { readonly port: number; readonly internalEndpoints: readonly string[] }[];
}

export interface LocalStateDoc {
  readonly node: string;
  readonly revision: number;
  readonly serviceCIDRs: readonly string[];
  readonly services: readonly LocalServiceDoc[];
}

export class KpngProcess {
  readonly docs: LocalStateDoc[] = [];
  stderr = "";
  readonly #child: ChildProcess;
  #buffer = "";
  readonly #exited: Promise<number | null>;

  constructor(args: readonly string[]) {
    this.#child = spawn(process.execPath, [MAIN, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, KUBECONFIG: "", HOME: "/nonexistent", KPNG_LOG_LEVEL: "info" },
    });
    this.#child.stdout!.setEncoding("utf8").on("data", (text: string) => this.#read(text));
    this.#child.stderr!.setEncoding("utf8").on("data", (text: string) => {
      this.stderr += text;
    });
    this.#exited = new Promise((resolve) => this.#child.on("exit", (code) => resolve(code)));
  }

  /** Documents are pretty-printed: each ends with a "}" line of its own. */
  #read(text: string): void {
    this.#buffer += text;
    for (let end = this.#buffer.indexOf("\n}\n"); end !== -1; end = this.#buffer.indexOf("\n}\n")) {
      this.docs.push(JSON.parse(this.#buffer.slice(0, end + 2)) as LocalStateDoc);
      this.#buffer = this.#buffer.slice(end + 3);
    }
  }

  get latest(): LocalStateDoc | undefined {
    return this.docs.at(-1);
  }

  /** Waits until the latest document satisfies the condition; returns how long that took. */
  async waitFor(
    what: string,
    condition: (doc: LocalStateDoc) => boolean,
    timeoutMs = 30_000,
  ): Promise<number> {
    const started = Date.now();
    while (!(this.latest && condition(this.latest))) {
      if (this.#child.exitCode !== null)
        throw new Error(`kpng exited while waiting for ${what}:\n${this.stderr}`);
      if (Date.now() - started > timeoutMs) {
        throw new Error(
          `timed out waiting for ${what}; latest: ${JSON.stringify(this.latest)}\n${this.stderr}`,
        );
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    return Date.now() - started;
  }

  async stop(): Promise<number | null> {
    if (this.#child.exitCode === null) this.#child.kill("SIGTERM");
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), 5000);
    try {
      return await this.#exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

export function serviceNames(doc: LocalStateDoc): string[] {
  return doc.services.map((s) => `${s.namespace}/${s.name}`);
}

export function endpointsOf(doc: LocalStateDoc, key: string): string[] {
  const svc = doc.services.find((s) => `${s.namespace}/${s.name}` === key);
  return svc?.ports.flatMap((p) => p.internalEndpoints) ?? [];
}
