// docs/kube-proxy-compat.md is the table of every KubeProxyConfiguration field and kube-proxy
// flag kpng reads: a field or flag added to the code must be added there too.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { KUBE_PROXY_FLAGS } from "../../../src/kube-proxy-compat/flags.ts";
import { FIELDS } from "../../../src/kube-proxy-compat/table.ts";

const DOC = readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "kube-proxy-compat.md"), "utf8");

function documented(path: string): boolean {
  const [head = "", ...rest] = path.split(".");
  const tail = rest.join(".");
  if (DOC.includes(`\`${path}\``)) return true;
  if ((head === "iptables" || head === "nftables") && DOC.includes(`section\`.${tail}\``)) return true;
  return DOC.includes(`\`${head}.*\``);
}

describe("docs/kube-proxy-compat.md", () => {
  it("lists every configuration field", () => {
    const missing = Object.entries(FIELDS)
      .filter(([path, type]) => type !== "object" && !documented(path))
      .map(([path]) => path);
    assert.deepEqual(missing, []);
  });

  it("lists every kube-proxy flag", () => {
    const missing = Object.keys(KUBE_PROXY_FLAGS).filter((flag) => {
      if (flag.startsWith("ipvs-")) return !DOC.includes("`--ipvs-*`");
      return !new RegExp(`--${flag}(?![a-z-])`).test(DOC);
    });
    assert.deepEqual(missing, []);
  });
});
