import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { execCommand } from "../../../src/host/exec.ts";
import { HUGE_PAGE_MALLOC, withHugePageMalloc } from "../../../src/host/huge-page-malloc.ts";
import { SmallSpawner } from "../../../src/host/small-spawner.ts";
import { procOfKpng } from "../../support/kpng-proc.ts";

const ROOT = join(fileURLToPath(new URL(".", import.meta.url)), "../../..");

describe("malloc on huge pages for the commands kpng starts", () => {
  const rows: [string, string | undefined, string][] = [
    ["no tunables: the one tunable", undefined, HUGE_PAGE_MALLOC],
    ["empty tunables: the one tunable", "", HUGE_PAGE_MALLOC],
    [
      "other tunables are kept, and it is added",
      "glibc.malloc.arena_max=2",
      `glibc.malloc.arena_max=2:${HUGE_PAGE_MALLOC}`,
    ],
    ["an operator's hugetlb=0 is kept (off)", "glibc.malloc.hugetlb=0", "glibc.malloc.hugetlb=0"],
    ["an operator's hugetlb=2 is kept", "a=1:glibc.malloc.hugetlb=2", "a=1:glibc.malloc.hugetlb=2"],
  ];
  for (const [name, given, expected] of rows) {
    test(name, () => {
      const env = given === undefined ? { PATH: "/bin" } : { PATH: "/bin", GLIBC_TUNABLES: given };
      const out = withHugePageMalloc(env);
      assert.equal(out.GLIBC_TUNABLES, expected);
      assert.equal(out.PATH, "/bin");
      assert.equal(env.GLIBC_TUNABLES, given, "the given environment is not changed");
    });
  }

  test("a command run by execCommand has it, with the rest of kpng's environment", async () => {
    const r = await execCommand(["sh", "-c", 'echo "$GLIBC_TUNABLES|$PATH"'], { timeoutMs: 10_000 });
    const [tunables, path] = r.stdout.trim().split("|");
    assert.match(tunables ?? "", /(^|:)glibc\.malloc\.hugetlb=/);
    assert.equal(path, process.env.PATH);
  });

  test("a command run from the small process has it too", async () => {
    const spawner = new SmallSpawner();
    try {
      const r = await spawner.exec(["sh", "-c", 'echo "$GLIBC_TUNABLES"'], { timeoutMs: 10_000 });
      assert.match(r.stdout.trim(), /(^|:)glibc\.malloc\.hugetlb=/);
    } finally {
      spawner.close();
    }
  });

  test("the image runs kpng with it (its last stage)", () => {
    const dockerfile = readFileSync(join(ROOT, "deploy/Dockerfile"), "utf8");
    const lastStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
    assert.match(
      lastStage,
      new RegExp(`^ENV GLIBC_TUNABLES=${HUGE_PAGE_MALLOC.replaceAll(".", "\\.")}$`, "m"),
    );
  });

  test("bin/kpng starts kpng with it, and keeps an operator's choice", async () => {
    assert.match(
      (await procOfKpng({ ...process.env, GLIBC_TUNABLES: "" })).environ,
      /^GLIBC_TUNABLES=glibc\.malloc\.hugetlb=1$/m,
    );
    assert.match(
      (await procOfKpng({ ...process.env, GLIBC_TUNABLES: "glibc.malloc.hugetlb=0" })).environ,
      /^GLIBC_TUNABLES=glibc\.malloc\.hugetlb=0$/m,
    );
  });
});
