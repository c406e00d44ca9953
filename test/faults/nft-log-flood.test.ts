// Fault: a persistent nft failure logged the whole transaction at every retry (866 KB at 31k
// Services, about 3.6 GB a day).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NftBackend } from "../../src/backends/nft/backend.ts";
import { excerptTransaction } from "../../src/backends/nft/failure-excerpt.ts";
import { FakeNft } from "../support/fake-nft.ts";
import { manyServices, state, V4 } from "../unit/backends/nft/fixtures.ts";
import { capturingLogger } from "./support.ts";

describe("fault: log floods on a persistent nft failure", () => {
  test("each log line carries the failing statement and its neighbours, not the transaction", async () => {
    const nft = new FakeNft();
    nft.failWhile(
      () => true,
      "/dev/stdin:40:1-9: Error: Could not process rule: No such file or directory\nadd chain …\n^^^^^^^^^\n",
    );
    const { log, lines } = capturingLogger();
    const backend = new NftBackend({ runner: nft, tables: [V4], log });
    await assert.rejects(backend.sync(state(manyServices(2000))));
    const transactionBytes = Buffer.byteLength(nft.transactions[0] ?? "");
    assert.ok(transactionBytes > 100_000, `a big transaction (${transactionBytes} bytes)`);
    const error = lines.find((l) => l.level === 50)!;
    const size = JSON.stringify(error).length;
    assert.ok(size < 4000, `log line of ${size} bytes`);
    const excerpt = error.transaction as {
      excerpt: string;
      line: number;
      totalBytes: number;
      omittedBytes: number;
    };
    assert.equal(excerpt.line, 40);
    const statementLines = (nft.transactions[0] ?? "").split("\n");
    assert.equal(excerpt.excerpt, statementLines.slice(37, 42).join("\n"));
    assert.equal(excerpt.totalBytes, transactionBytes);
    assert.ok(excerpt.omittedBytes > 100_000);
  });

  test("the same failure again is logged at a decaying rate; a new one at once", async () => {
    const nft = new FakeNft();
    const stop = nft.failWhile(() => true, "/dev/stdin:3:1-9: Error: Could not process rule: File exists\n");
    const { log, lines } = capturingLogger();
    const backend = new NftBackend({ runner: nft, tables: [V4], log });
    for (let i = 0; i < 20; i++) await backend.sync(state(manyServices(3))).catch(() => {});
    const errors = lines.filter((l) => l.level === 50);
    assert.deepEqual(
      errors.map((l) => l.failures),
      [1, 2, 4, 8, 16],
    );
    assert.equal(errors.at(-1)?.suppressedRepeats, 7);
    stop();
    nft.failWhile(() => true, "/dev/stdin:1:1-9: Error: Operation not permitted\n");
    await backend.sync(state(manyServices(3))).catch(() => {});
    assert.match(String(lines.filter((l) => l.level === 50).at(-1)?.stderr), /not permitted/);
  });

  test("excerpts: an error with no position shows the first lines; a one-line transaction is cut near the column", () => {
    const text = `${Array.from({ length: 100 }, (_, i) => `line ${i + 1}`).join("\n")}\n`;
    const none = excerptTransaction(text, "Error: something");
    assert.equal(none.excerpt, "line 1\nline 2\nline 3\nline 4\nline 5");
    assert.equal(none.line, undefined);
    assert.equal(none.totalLines, 100);
    const one = `${"x".repeat(5000)}BAD${"y".repeat(5000)}`;
    const cut = excerptTransaction(one, "<cmdline>:1:5001-5003: Error: bad");
    assert.ok(cut.excerpt.includes("BAD"));
    assert.ok(cut.excerpt.length < 500);
  });
});
