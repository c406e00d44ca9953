// `npm ci` insists that the lock lists every optional platform package of a dependency (Biome's
// and buf's per-OS binaries), but a registry mirror that serves only this platform's packages
// leaves them out when the lock is written. This adds the missing entries with their os/cpu
// constraints, so `npm ci` accepts the lock and, as on any other machine, installs only the
// package for the platform it runs on. Run after `npm install` changes the lock:
//
//   ./node_modules/.bin/node scripts/complete-lockfile.ts

import { readFileSync, writeFileSync } from "node:fs";

interface LockEntry {
  version?: string;
  dev?: boolean;
  optional?: boolean;
  optionalDependencies?: Record<string, string>;
  [field: string]: unknown;
}

const file = process.argv[2] ?? "package-lock.json";
const lock = JSON.parse(readFileSync(file, "utf8")) as { packages: Record<string, LockEntry> };
const platformPattern = /-(android|darwin|linux|win32)-(arm64|x64|armv7|ia32)(-musl)?$/;

function platformOf(name: string): Record<string, string[]> | undefined {
  const match = platformPattern.exec(name);
  if (match === null) return undefined;
  const [, os = "", cpu = "", musl] = match;
  return { os: [os], cpu: [cpu === "armv7" ? "arm" : cpu], ...(musl ? { libc: ["musl"] } : {}) };
}

let added = 0;
for (const entry of Object.values(lock.packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `node_modules/${name}`;
    const platform = platformOf(name);
    if (key in lock.packages || platform === undefined) continue;
    lock.packages[key] = { version, ...(entry.dev ? { dev: true } : {}), optional: true, ...platform };
    added++;
  }
}
const sorted = Object.entries(lock.packages).sort(([a], [b]) =>
  a === "" ? -1 : b === "" ? 1 : a < b ? -1 : a > b ? 1 : 0,
);
lock.packages = Object.fromEntries(sorted);
writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`added ${added} platform entries to ${file}`);
