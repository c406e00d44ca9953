// `nft -f` started by the small process: the transaction reaches nft whole (in a file, removed
// afterwards), nft's errors read as before, a hung nft is a timeout, and close() fails a call in
// flight at once.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { curableByRewrite, ExecNftRunner, NftError } from "../../../../src/backends/nft/runner.ts";
import { SmallSpawner } from "../../../../src/host/small-spawner.ts";
import { eventually } from "../../../support/eventually.ts";

const SERVICE_IPS = { kind: "map", name: "service-ips" } as const;

/** Stands for nft: reads the file of `-f <file>`, reports its size, path and parent on stderr, and fails. */
const REPORTING_NFT = [
  "sh",
  "-c",
  'n=$(wc -c < "$2"); echo "bytes $n parent $PPID file $2" >&2; exit 1',
  "nft",
];

describe("nft transactions started from the small process", () => {
  const spawner = new SmallSpawner();
  after(() => spawner.close());

  test("the small process starts nft on the whole transaction; nft's error is the runner's; the file goes", async () => {
    const runner = new ExecNftRunner(REPORTING_NFT, { spawner });
    const text = `add table ip kpng\n${"add element ip kpng m { 10.0.0.1 }\n".repeat(30_000)}`;
    const err = await runner.run(text).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof NftError, String(err));
    assert.match(err.message, /^nft -f failed: bytes \d+ parent \d+/);
    const [, bytes, parent] = /bytes (\d+) parent (\d+)/.exec(err.stderr) ?? [];
    assert.equal(Number(bytes), Buffer.byteLength(text));
    assert.equal(parent, String(spawner.pid), "forked by the small process, not by kpng");
    assert.notEqual(parent, String(process.pid));
    const file = /file (\S+)/.exec(err.stderr)?.[1] ?? "";
    assert.match(file, /kpng-nft-.*transaction\.nft$/);
    assert.equal(existsSync(dirname(file)), false, "the transaction's directory is removed");
  });

  test("a listing is started by the small process and read back from a file, which then goes", async () => {
    // $5 is the table's name; nft's JSON, with the parent's pid and the file nft writes to in it.
    const json = '{"table": "%s", "parent": %s, "file": "%s"}\\n';
    const runner = new ExecNftRunner(
      ["sh", "-c", `printf '${json}' "$5" "$PPID" "$(readlink /proc/$$/fd/1)"`, "nft"],
      { spawner },
    );
    const listed = JSON.parse(String(await runner.list("ip", "kpng", SERVICE_IPS))) as {
      table: string;
      parent: number;
      file: string;
    };
    assert.deepEqual([listed.table, listed.parent], ["kpng", spawner.pid]);
    assert.match(listed.file, /kpng-nft-.*output$/);
    assert.equal(existsSync(dirname(listed.file)), false, "the listing's directory is removed");
    const missing = new ExecNftRunner(
      ["sh", "-c", 'echo "Error: No such file or directory; did you mean table ‘kpng’?" >&2; exit 1', "nft"],
      { spawner },
    );
    assert.equal(await missing.list("ip", "kpng", { objects: "sets" }), undefined, "no such table");
  });

  test("a listing has a deadline of its own, longer than a transaction's: a large table takes minutes to list", async () => {
    // Stands for nft on a large table: answers after 600 ms, whatever it is asked.
    const slow = ["sh", "-c", `sleep 0.6; printf '{"nftables": []}'`, "nft"];
    for (const from of [{ spawner }, {}]) {
      const runner = new ExecNftRunner(slow, { ...from, timeoutMs: 200, listTimeoutMs: 5000 });
      assert.deepEqual(JSON.parse(String(await runner.list("ip", "kpng", SERVICE_IPS))), { nftables: [] });
      await assert.rejects(runner.run("add table ip kpng\n"), /did not finish within 200 ms; killed/);
      const short = new ExecNftRunner(slow, { ...from, timeoutMs: 5000, listTimeoutMs: 200 });
      await assert.rejects(short.list("ip", "kpng", SERVICE_IPS), /did not finish within 200 ms; killed/);
    }
  });

  test("a hung nft is killed at the deadline and the call fails", async () => {
    const runner = new ExecNftRunner(["sh", "-c", "sleep 30", "nft"], { spawner, timeoutMs: 200 });
    await assert.rejects(runner.run("add table ip kpng\n"), /did not finish within 200 ms; killed/);
  });

  // Only a refusal of the rules may be cured by deleting kpng's table and writing it anew; the
  // sync loop never deletes a serving table for anything else.
  /** Stands for nft answering `stderr` and exiting 1, as when it refuses a transaction. */
  const answering = (stderr: string) => ["sh", "-c", `echo "${stderr}" >&2; exit 1`, "nft"];
  const failures: readonly (readonly [string, readonly string[], boolean])[] = [
    [
      "nft refuses a set of another type under kpng's name",
      answering("Error: Could not process rule: File exists"),
      true,
    ],
    [
      "nft refuses a rule that names a missing set",
      answering("Error: Could not process rule: No such file or directory"),
      true,
    ],
    [
      "the kernel is out of memory",
      answering("Error: Could not process rule: Cannot allocate memory"),
      false,
    ],
    ["netlink buffers are full", answering("netlink: Error: No buffer space available"), false],
    [
      "kpng may not change the ruleset",
      answering("Error: Could not process rule: Operation not permitted"),
      false,
    ],
    ["nft runs past its deadline", ["sh", "-c", "sleep 30", "nft"], false],
    ["nft is killed", ["sh", "-c", "kill -9 $$", "nft"], false],
    ["nft is not installed", ["/nonexistent/nft"], false],
  ];
  for (const [what, command, curable] of failures) {
    test(`${what}: ${curable ? "a rewrite may cure it" : "no rewrite"}`, async () => {
      for (const from of [{ spawner }, {}]) {
        const runner = new ExecNftRunner(command, { ...from, timeoutMs: 300 });
        const err = await runner.run("add table ip kpng\n").then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(err instanceof NftError, String(err));
        assert.equal(
          curableByRewrite(err),
          curable,
          `${err.message} (${"spawner" in from ? "from the small process" : "from kpng"})`,
        );
      }
    });
  }

  test("close() fails a call in flight at once, and later calls", async () => {
    const marker = join(mkdtempSync(join(tmpdir(), "kpng-test-")), "started");
    // $0 is the marker: nft has started once it exists.
    const runner = new ExecNftRunner(["sh", "-c", 'touch "$0"; sleep 30', marker], {
      spawner,
      timeoutMs: 60_000,
    });
    const inFlight = runner.run("add table ip kpng\n");
    await eventually(async () => existsSync(marker), "nft started by the small process");
    runner.close();
    await assert.rejects(inFlight, /the nft runner is closed/);
    await assert.rejects(runner.run("add table ip kpng\n"), /the nft runner is closed/);
    rmSync(dirname(marker), { recursive: true, force: true });
  });
});
