// The interactive runner against the real nft, in a network namespace of its own.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { InteractiveNftRunner } from "../../../src/backends/nft/interactive-runner.ts";
import {
  curableByRewrite,
  ExecNftRunner,
  NftError,
  type NftListing,
  type NftRunner,
} from "../../../src/backends/nft/runner.ts";
import { Netns, netnsSkipReason } from "../../support/netns.ts";

const skip = await netnsSkipReason();

/** Counts what reaches the fallback, so a test can tell which path ran a transaction. */
class CountingRunner implements NftRunner {
  readonly inner: NftRunner;
  runs = 0;
  constructor(inner: NftRunner) {
    this.inner = inner;
  }
  run(text: string): Promise<void> {
    this.runs++;
    return this.inner.run(text);
  }
  check(text: string): Promise<void> {
    return this.inner.check(text);
  }
  list(family: "ip" | "ip6", table: string, what: NftListing): Promise<Buffer | undefined> {
    return this.inner.list(family, table, what);
  }
}

describe("interactive nft runner", { skip }, () => {
  let ns: Netns;
  let fallback: CountingRunner;
  let runner: InteractiveNftRunner;
  const restarts: string[] = [];
  /** A transaction with its one-line form, as the backend renders both (ops.ts). */
  const viaLine = (text: string) => runner.run(text, text.trimEnd().split("\n").join("; "));

  before(async () => {
    ns = await Netns.create();
    const command = ["ip", "netns", "exec", ns.name, "nft"];
    fallback = new CountingRunner(new ExecNftRunner(command));
    runner = new InteractiveNftRunner({ command, fallback, onRestart: (r) => restarts.push(r) });
    await fallback.run("add table ip t\nadd map ip t m { type ipv4_addr : verdict; }\nadd chain ip t c\n");
    fallback.runs = 0;
  });
  after(async () => {
    runner?.close();
    await ns?.destroy();
  });

  async function elements(): Promise<string[]> {
    const r = await ns.exec(["nft", "-j", "list", "map", "ip", "t", "m"]);
    const json = JSON.parse(r.stdout) as { nftables: { map?: { elem?: [string, unknown][] } }[] };
    const map = json.nftables.find((o) => o.map !== undefined)?.map;
    return (map?.elem ?? []).map((e) => e[0]).sort();
  }

  test("applies transactions through one nft process", async () => {
    await viaLine("add element ip t m { 192.0.2.1 : drop }\n");
    const pid = runner.pid;
    assert.ok(pid !== undefined);
    await viaLine("flush chain ip t c\nadd rule ip t c meta l4proto tcp dnat to 192.0.2.5:80\n");
    await viaLine("add element ip t m { 192.0.2.2 : goto c }\n");
    assert.equal(runner.pid, pid);
    assert.equal(fallback.runs, 0);
    assert.deepEqual(await elements(), ["192.0.2.1", "192.0.2.2"]);
    const chain = await ns.exec(["nft", "list", "chain", "ip", "t", "c"]);
    assert.match(chain.stdout, /dnat to 192\.0\.2\.5:80/);
  });

  test("a failing transaction is rejected with nft's error and none of it is applied", async () => {
    await assert.rejects(
      viaLine(
        "add element ip t m { 192.0.2.3 : drop }\nadd element ip t m { 192.0.2.4 : goto nosuchchain }\n",
      ),
      (e: unknown) =>
        e instanceof NftError &&
        /Error:/.test(e.stderr) &&
        /nosuchchain/.test(e.stderr) &&
        curableByRewrite(e),
    );
    assert.deepEqual(await elements(), ["192.0.2.1", "192.0.2.2"]);
    // The process survives a failed transaction and keeps working.
    await viaLine("add element ip t m { 192.0.2.3 : drop }\n");
    assert.deepEqual(await elements(), ["192.0.2.1", "192.0.2.2", "192.0.2.3"]);
    assert.equal(fallback.runs, 0);
  });

  test("concurrent transactions are applied one at a time, all of them", async () => {
    await Promise.all(
      [10, 11, 12, 13, 14].map((i) => viaLine(`add element ip t m { 198.51.100.${i} : drop }\n`)),
    );
    const els = await elements();
    for (const i of [10, 11, 12, 13, 14]) assert.ok(els.includes(`198.51.100.${i}`));
  });

  test("after the nft process is killed, the next transaction still applies and a new process starts", async () => {
    const pid = runner.pid;
    assert.ok(pid !== undefined);
    process.kill(pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, 100));
    await viaLine("add element ip t m { 203.0.113.1 : drop }\n");
    assert.ok((await elements()).includes("203.0.113.1"));
    await viaLine("add element ip t m { 203.0.113.2 : drop }\n");
    assert.ok((await elements()).includes("203.0.113.2"));
    assert.notEqual(runner.pid, undefined);
    assert.notEqual(runner.pid, pid);
  });

  test("a transaction killed in flight goes to nft -f and is applied once", async () => {
    const pid = runner.pid;
    assert.ok(pid !== undefined);
    const before = fallback.runs;
    const pending = viaLine("add element ip t m { 203.0.113.3 : drop }\n");
    process.kill(pid, "SIGKILL");
    await pending;
    assert.ok((await elements()).includes("203.0.113.3"));
    // Either the line made it before the kill, or the fallback ran it; both leave it applied.
    assert.ok(fallback.runs - before <= 1);
  });

  test("prepare() starts the process ahead of the next transaction, which then uses it", async () => {
    const pid = runner.pid;
    if (pid !== undefined) {
      process.kill(pid, "SIGKILL");
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(runner.pid, undefined);
    const before = fallback.runs;
    await runner.prepare();
    const started = runner.pid;
    assert.ok(started !== undefined && started !== pid);
    await runner.prepare(); // already running: nothing to do
    await viaLine("add element ip t m { 203.0.113.4 : drop }\n");
    assert.equal(runner.pid, started);
    assert.equal(fallback.runs, before);
    assert.ok((await elements()).includes("203.0.113.4"));
  });

  test("a transaction without its one-line form goes to nft -f", async () => {
    const before = fallback.runs;
    await runner.run("add chain ip t d {\n  type filter hook input priority 0; policy accept;\n}\n");
    assert.equal(fallback.runs, before + 1);
  });
});
