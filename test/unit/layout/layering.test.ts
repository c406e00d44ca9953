// Imports flow one way: sources → brain → api/client → backends/sinks/node → cli. The table below
// is the one place that says which folder of src/ may import which; docs/architecture.md shows
// the same picture. A module importing from a layer above its own fails this test.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const SRC = join(ROOT, "src");

/** Folder (under src/) → the folders it may import from, besides itself. */
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  lib: [],
  model: ["lib"],
  observability: ["lib", "model"],
  plugin: ["lib", "model", "observability"],
  kube: ["lib", "model", "observability", "plugin"],
  host: ["lib", "model", "observability", "plugin"],
  "sources/file": ["lib", "model", "observability", "plugin"],
  "sources/kube": ["lib", "model", "observability", "plugin", "kube"],
  brain: ["lib", "model", "observability", "plugin"],
  api: ["lib", "model", "observability", "plugin", "brain"],
  client: ["lib", "model", "observability", "plugin", "api"],
  "sources/api": ["lib", "model", "observability", "plugin", "api", "client"],
  node: ["lib", "model", "observability", "plugin", "client", "host"],
  "backend-core": ["lib", "model", "observability", "plugin", "client", "host", "node"],
  "backends/*": ["lib", "model", "observability", "plugin", "client", "host", "node", "backend-core"],
  "sinks/*": ["lib", "model", "observability", "plugin"],
  "controllers/*": ["lib", "model", "observability", "plugin", "kube"],
  "kube-proxy-compat": ["lib", "model", "observability", "plugin"],
  cli: ["*"],
};

function layerOf(file: string): string {
  const rel = relative(SRC, file).split("/");
  const [top = "", second = ""] = rel;
  if (top === "sources") return `sources/${second}`;
  if (top === "backends" || top === "sinks" || top === "controllers") return `${top}/*`;
  return top;
}

function sameOrAllowed(from: string, to: string): boolean {
  if (from === to) return true;
  const allowed = ALLOWED[from] ?? [];
  return allowed.includes("*") || allowed.includes(to);
}

function* tsFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* tsFiles(path);
    else if (entry.name.endsWith(".ts")) yield path;
  }
}

const IMPORT =
  /(?:^|\n)\s*(?:import|export)[^"'`;]*?from\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;

function relativeImports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2] ?? "";
    if (spec.startsWith(".")) out.push(resolve(dirname(file), spec));
  }
  return out;
}

describe("layering of src/", () => {
  const files = [...tsFiles(SRC)].filter((f) => !f.includes("/gen/"));

  test("every folder of src/ has a row in the table", () => {
    const unknown = new Set(files.map(layerOf).filter((l) => !(l in ALLOWED)));
    assert.deepEqual([...unknown], [], "add the new folder to ALLOWED (and to docs/architecture.md)");
  });

  test("no module imports from a layer above its own", () => {
    const violations: string[] = [];
    let seen = 0;
    for (const file of files) {
      const from = layerOf(file);
      for (const target of relativeImports(file)) {
        seen++;
        const where = relative(ROOT, target);
        if (!target.startsWith(`${SRC}/`)) {
          violations.push(`${relative(ROOT, file)} imports ${where}, outside src/ (test or tool code)`);
          continue;
        }
        if (target.includes("/gen/")) continue;
        const to = layerOf(target);
        if (!sameOrAllowed(from, to))
          violations.push(`${relative(ROOT, file)} (${from}) imports ${where} (${to})`);
      }
    }
    assert.ok(seen > 200, `the import scan found only ${seen} relative imports`);
    assert.deepEqual(violations, []);
  });

  test("the checker sees a violation (a backend importing the brain)", () => {
    assert.equal(sameOrAllowed("backends/*", "brain"), false);
    assert.equal(sameOrAllowed("brain", "cli"), false);
    assert.equal(sameOrAllowed("cli", "brain"), true);
  });
});
