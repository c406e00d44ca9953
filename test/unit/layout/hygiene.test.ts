// Repository hygiene that review would otherwise have to catch by eye: exports nobody imports,
// dependencies that are imported but not declared (or declared but never imported), paths in the
// docs that no longer exist, one backend importing another, a plug-in parsing its options by hand
// instead of through a zod schema, and benchmark figures frozen into code comments (they go stale; the numbers live in docs/performance.md and bench/).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

const tracked = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], {
  cwd: ROOT,
  encoding: "utf8",
})
  .split("\n")
  .filter((f) => f !== "" && existsSync(join(ROOT, f)));

const tsFiles = tracked.filter((f) => f.endsWith(".ts") && !f.includes("/gen/"));
const sourceOf = new Map(tsFiles.map((f) => [f, readFileSync(join(ROOT, f), "utf8")]));

const IMPORT_FROM = /(?:import|export)\s+(type\s+)?([^"'`;]*?)\s+from\s*["']([^"']+)["']/g;
const DYNAMIC_IMPORT = /import\(\s*["']([^"']+)["']\s*\)/g;
const SIDE_EFFECT_IMPORT = /(?:^|\n)\s*import\s*["']([^"']+)["']/g;

function resolveSpecifier(from: string, spec: string): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  return relative(ROOT, resolve(ROOT, dirname(from), spec));
}

/** The names each file imports from each other file ("*" when it takes them all). */
function importedNames(): Map<string, Set<string>> {
  const used = new Map<string, Set<string>>();
  const add = (file: string, name: string) => {
    let names = used.get(file);
    if (names === undefined) {
      names = new Set();
      used.set(file, names);
    }
    names.add(name);
  };
  for (const [file, text] of sourceOf) {
    for (const m of text.matchAll(IMPORT_FROM)) {
      const target = resolveSpecifier(file, m[3] ?? "");
      if (target === undefined) continue;
      const clause = m[2] ?? "";
      if (clause.includes("*")) add(target, "*");
      const braced = /\{([^}]*)\}/.exec(clause)?.[1];
      for (const part of braced?.split(",") ?? []) {
        const name = part
          .trim()
          .replace(/^type\s+/, "")
          .split(/\s+as\s+/)[0];
        if (name) add(target, name);
      }
      const defaultName = clause
        .replace(/\{[^}]*\}/, "")
        .replace(/,/g, "")
        .trim();
      if (defaultName !== "" && !defaultName.includes("*") && defaultName !== "type") add(target, "default");
    }
    for (const m of text.matchAll(DYNAMIC_IMPORT)) {
      const target = resolveSpecifier(file, m[1] ?? "");
      if (target !== undefined) add(target, "*");
    }
  }
  return used;
}

const EXPORTED =
  /(?:^|\n)export\s+(?:declare\s+)?(?:default\s+)?(?:async\s+)?(?:function\*?|const|let|class|interface|type|abstract\s+class)\s+([A-Za-z_$][\w$]*)/g;

describe("repository hygiene", () => {
  test("every export of src/ is imported somewhere (src, test, bench, tools)", () => {
    const used = importedNames();
    const unused: string[] = [];
    for (const [file, text] of sourceOf) {
      if (!file.startsWith("src/")) continue;
      const names = used.get(file) ?? new Set<string>();
      if (names.has("*")) continue;
      for (const m of text.matchAll(EXPORTED)) {
        const name = m[1] ?? "";
        if (!names.has(name)) unused.push(`${file}: ${name}`);
      }
    }
    assert.deepEqual(unused, [], "drop the export keyword (or the code) of these");
  });

  test("every package imported is declared, and every declared package is used", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
      dependencies?: Record<string, string>;
      devDependencies?: Record<string, string>;
      scripts?: Record<string, string>;
    };
    const deps = new Set(Object.keys(pkg.dependencies ?? {}));
    const devDeps = new Set(Object.keys(pkg.devDependencies ?? {}));
    const packageName = (spec: string) =>
      spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : (spec.split("/")[0] ?? spec);
    const problems: string[] = [];
    const imported = new Set<string>();
    for (const [file, text] of sourceOf) {
      const specs = [
        ...[...text.matchAll(IMPORT_FROM)].map((m) => m[3] ?? ""),
        ...[...text.matchAll(DYNAMIC_IMPORT)].map((m) => m[1] ?? ""),
        ...[...text.matchAll(SIDE_EFFECT_IMPORT)].map((m) => m[1] ?? ""),
      ];
      for (const spec of specs) {
        if (spec.startsWith(".") || spec.startsWith("node:") || spec === "") continue;
        const name = packageName(spec);
        imported.add(name);
        const shipped = file.startsWith("src/") || file.startsWith("bin/");
        if (shipped && !deps.has(name)) problems.push(`${file} imports ${name}, not in dependencies`);
        if (!shipped && !deps.has(name) && !devDeps.has(name))
          problems.push(`${file} imports undeclared ${name}`);
      }
    }
    // Tools run by scripts or config rather than imported.
    const scripts = Object.values(pkg.scripts ?? {}).join("\n");
    const byTool: Record<string, boolean> = {
      node: true, // the pinned runtime the scripts run on
      "@types/node": true,
      typescript: scripts.includes("tsc"),
      "@biomejs/biome": scripts.includes("biome"),
      "@bufbuild/buf": scripts.includes("buf generate"),
      "ts-proto":
        existsSync(join(ROOT, "buf.gen.yaml")) &&
        readFileSync(join(ROOT, "buf.gen.yaml"), "utf8").includes("ts_proto"),
    };
    for (const name of [...deps, ...devDeps]) {
      if (!imported.has(name) && !byTool[name]) problems.push(`${name} is declared but never imported`);
    }
    assert.deepEqual(problems, []);
  });

  test("every repository path named in the docs exists", () => {
    const docs = tracked.filter((f) => f.endsWith(".md") && !f.startsWith("node_modules/"));
    const FILE_LIKE = /^[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)*(?:\.(?:ts|md|yaml|yml|json|proto|sh|c|h)|\/)$/;
    const exists = (doc: string, path: string) => {
      const clean = path.replace(/\/$/, "");
      const candidates = [
        clean,
        join(dirname(doc), clean),
        `src/${clean}`,
        `test/${clean}`,
        `test/unit/${clean}`,
      ];
      if (candidates.some((c) => existsSync(join(ROOT, c)))) return true;
      // A path named from inside its folder (`nft/backend.ts`, `fallback/`): some tracked file ends so.
      return tracked.some((f) => f.endsWith(`/${clean}`) || f.includes(`/${clean}/`));
    };
    const missing: string[] = [];
    for (const doc of docs) {
      const text = readFileSync(join(ROOT, doc), "utf8");
      const named = [
        ...[...text.matchAll(/`([^`\s]+)`/g)].map((m) => m[1] ?? ""),
        ...[...text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)].map((m) => m[1] ?? ""),
      ];
      for (const path of named) {
        if (path.includes("://") || path.startsWith("/") || !FILE_LIKE.test(path)) continue;
        if (/\.(?:k8s\.io|kubernetes\.io|kpng\.io)/.test(path)) continue;
        if (!exists(doc, path)) missing.push(`${doc}: ${path}`);
      }
    }
    assert.deepEqual(missing, []);
  });

  test("no backend imports a sibling backend", () => {
    const crossings: string[] = [];
    for (const [file, text] of sourceOf) {
      const own = /^src\/backends\/([^/]+)\//.exec(file)?.[1];
      if (own === undefined) continue;
      const specs = [
        ...[...text.matchAll(IMPORT_FROM)].map((m) => m[3] ?? ""),
        ...[...text.matchAll(DYNAMIC_IMPORT)].map((m) => m[1] ?? ""),
      ];
      for (const spec of specs) {
        const target = resolveSpecifier(file, spec);
        const other = target === undefined ? undefined : /^src\/backends\/([^/]+)\//.exec(target)?.[1];
        if (other !== undefined && other !== own) crossings.push(`${file} imports ${target}`);
      }
    }
    assert.deepEqual(crossings, []);
  });

  test("every plug-in's parseOptions goes through a zod schema (parseOptionsWith)", () => {
    const viaZod = (file: string | undefined) =>
      file !== undefined && sourceOf.get(file)?.includes("parseOptionsWith(") === true;
    const handParsed: string[] = [];
    for (const [file, text] of sourceOf) {
      if (!file.startsWith("src/") || viaZod(file)) continue;
      for (const m of text.matchAll(/\bparseOptions:\s*([^,\n]+)/g)) {
        // A parser imported from another module passes when that module parses with a schema.
        const names = (m[1] ?? "").match(/[A-Za-z_$][\w$]*/g) ?? [];
        const sources = [...text.matchAll(IMPORT_FROM)]
          .filter((i) => names.some((n) => new RegExp(`\\b${n}\\b`).test(i[2] ?? "")))
          .map((i) => resolveSpecifier(file, i[3] ?? ""));
        if (!sources.some(viaZod)) handParsed.push(`${file}: parseOptions: ${(m[1] ?? "").trim()}`);
      }
    }
    assert.deepEqual(handParsed, []);
  });

  test("no benchmark figures in code comments", () => {
    // A measured figure: a number with a unit of time or size next to a word of measuring.
    const FIGURE =
      /\b\d+(?:\.\d+)?\s*(?:ns|µs|us|ms|s|min|KiB|MiB|GiB|KB|MB|GB|x|×)\b.*\b(?:took|takes|measured|faster|slower|costs?|spends?)\b|\b(?:took|takes|measured|faster|slower|costs?|spends?)\b.*\b\d+(?:\.\d+)?\s*(?:ns|µs|us|ms|min|KiB|MiB|GiB|KB|MB|GB|×)(?=[\s,.;:)]|$)/i;
    const found: string[] = [];
    for (const [file, text] of sourceOf) {
      if (!file.startsWith("src/")) continue;
      text.split("\n").forEach((line, i) => {
        const comment = /(?:^|\s)(?:\/\/|\*|\/\*\*?)\s?(.*)$/.exec(line)?.[1];
        if (comment !== undefined && FIGURE.test(comment)) found.push(`${file}:${i + 1}: ${comment.trim()}`);
      });
    }
    assert.deepEqual(found, [], "keep measured numbers in docs/performance.md, not in comments");
  });

  test("unit tests wait on conditions or fake timers, never on a fixed real sleep", () => {
    // An awaited timer promise (`new Promise((r) => setTimeout(r, ms))`, `sleep(ms)`, the
    // setTimeout of node:timers/promises) is a fixed wait unless it is the pause of a polling loop
    // with a deadline, named on the line or in the few lines above it.
    const SLEEP =
      /await\s+(?:new Promise(?:<[^>]*>)?\(\s*\(?\w*\)?\s*=>\s*setTimeout\(|(?:\w+\.)?(?:sleep|delay|setTimeout)\()/;
    const DEADLINE = /\bdeadline\b|\btimeoutMs\b|Date\.now\(\)/;
    const found: string[] = [];
    for (const [file, text] of sourceOf) {
      if (!file.startsWith("test/unit/")) continue;
      const lines = text.split("\n");
      lines.forEach((line, i) => {
        if (!SLEEP.test(line)) return;
        if (lines.slice(Math.max(0, i - 5), i + 1).some((l) => DEADLINE.test(l))) return;
        found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    assert.deepEqual(
      found,
      [],
      "wait for a condition (waitFor/eventually with a deadline), settle() for event-loop turns, or drive timers with mock.timers / FakeClock",
    );
  });
});
