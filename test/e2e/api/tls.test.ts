// mTLS through the CLI: `kpng file … to-api --listen tcp://127.0.0.1:0 --tls-cert --tls-key
// --tls-ca`. Certificates are made for the test with openssl (ECDSA P-256, SAN IP:127.0.0.1).

import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { TlsPaths } from "../../../src/client/connection.ts";
import { type WireChangeSet, watchLocal } from "../../../src/client/watch.ts";

function openssl(dir: string, ...args: string[]): void {
  const r = spawnSync("openssl", args, { cwd: dir, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`openssl ${args.join(" ")}: ${r.stderr}`);
}

/** A CA, and a certificate signed by it for `name` (server or client). */
function makeCa(dir: string, ca: string): void {
  openssl(
    dir,
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    `${ca}.key`,
    "-out",
    `${ca}.pem`,
    "-days",
    "1",
    "-subj",
    `/CN=${ca}`,
  );
}
function makeCert(dir: string, ca: string, name: string, ext: string): void {
  openssl(
    dir,
    "req",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.csr`,
    "-subj",
    `/CN=${name}`,
  );
  openssl(
    dir,
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    `${ca}.pem`,
    "-CAkey",
    `${ca}.key`,
    "-CAcreateserial",
    "-out",
    `${name}.pem`,
    "-days",
    "1",
    "-extfile",
    ext,
  );
}

/** First change set, or the first error when the stream cannot be opened. */
async function firstChangeSet(api: string, tls: TlsPaths): Promise<WireChangeSet | Error> {
  const stop = new AbortController();
  let result: WireChangeSet | Error | undefined;
  const watching = watchLocal("node-1", {
    api,
    tls,
    signal: stop.signal,
    onChangeSet: (cs) => {
      result ??= cs;
      stop.abort();
    },
    onDisconnect: (err) => {
      result ??= err;
      stop.abort();
    },
  });
  const timer = setTimeout(() => stop.abort(), 10_000);
  await watching;
  clearTimeout(timer);
  return result ?? new Error("timed out");
}

describe("to-api with mTLS", () => {
  let dir: string;
  let brain: ChildProcess;
  let api: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "kpng-tls-"));
    const { writeFile } = await import("node:fs/promises");
    await writeFile(join(dir, "server.ext"), "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    await writeFile(join(dir, "client.ext"), "extendedKeyUsage=clientAuth\n");
    await writeFile(join(dir, "stranger.ext"), "extendedKeyUsage=clientAuth\n");
    makeCa(dir, "ca");
    makeCa(dir, "other-ca");
    makeCert(dir, "ca", "server", "server.ext");
    makeCert(dir, "ca", "client", "client.ext");
    makeCert(dir, "other-ca", "stranger", "stranger.ext");
    brain = spawn(
      process.execPath,
      [
        "src/cli/main.ts",
        "file",
        "--input",
        "examples/cluster.yaml",
        "to-api",
        "--listen",
        "tcp://127.0.0.1:0",
        "--tls-cert",
        join(dir, "server.pem"),
        "--tls-key",
        join(dir, "server.key"),
        "--tls-ca",
        join(dir, "ca.pem"),
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    api = await new Promise<string>((resolve, reject) => {
      let logs = "";
      const timer = setTimeout(() => reject(new Error(`no listen address in: ${logs}`)), 20_000);
      const read = (d: Buffer) => {
        logs += d;
        const m = /"listen":"(127\.0\.0\.1:\d+)"/.exec(logs);
        if (m !== null) {
          clearTimeout(timer);
          resolve(`tcp://${m[1]}`);
        }
      };
      brain.stdout!.on("data", read);
      brain.stderr!.on("data", read);
    });
  });

  after(async () => {
    brain.kill("SIGTERM");
    if (brain.exitCode === null) await new Promise((r) => brain.once("exit", r));
    await rm(dir, { recursive: true, force: true });
  });

  test("a client with a certificate from the right CA reads the state", async () => {
    const got = await firstChangeSet(api, {
      ca: join(dir, "ca.pem"),
      cert: join(dir, "client.pem"),
      key: join(dir, "client.key"),
    });
    assert.ok(!(got instanceof Error), String(got));
    assert.equal(got.reset, true);
    assert.ok(got.ops.length > 0);
  });

  test("a client that trusts another CA refuses the server", async () => {
    const got = await firstChangeSet(api, {
      ca: join(dir, "other-ca.pem"),
      cert: join(dir, "client.pem"),
      key: join(dir, "client.key"),
    });
    assert.ok(got instanceof Error, "no state without a trusted server");
  });

  test("a client without a certificate is refused", async () => {
    const got = await firstChangeSet(api, { ca: join(dir, "ca.pem") });
    assert.ok(got instanceof Error, "no state without a client certificate");
  });

  test("a client whose certificate another CA signed is refused", async () => {
    const got = await firstChangeSet(api, {
      ca: join(dir, "ca.pem"),
      cert: join(dir, "stranger.pem"),
      key: join(dir, "stranger.key"),
    });
    assert.ok(got instanceof Error, "no state with an untrusted client certificate");
  });

  test("a plaintext client is refused", async () => {
    const got = await firstChangeSet(api, {});
    assert.ok(got instanceof Error);
  });
});
