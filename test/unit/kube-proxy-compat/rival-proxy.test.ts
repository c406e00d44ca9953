// The start-up warning when kube-proxy's DaemonSet runs beside kpng (as after a kubeadm upgrade
// that did not skip the addon/kube-proxy phase).

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pino } from "pino";
import {
  DAEMONSETS_PATH,
  kubeProxyDaemonSets,
  warnIfKubeProxyRuns,
} from "../../../src/kube-proxy-compat/rival-proxy.ts";

const ds = (name: string, image: string, desired: number) => ({
  metadata: { name },
  spec: { template: { spec: { containers: [{ image }] } } },
  status: { desiredNumberScheduled: desired },
});

describe("a kube-proxy DaemonSet beside kpng", () => {
  it("is one that runs kube-proxy's image on some node", () => {
    const list = {
      items: [
        ds("kube-proxy", "registry.k8s.io/kube-proxy:v1.35.0", 3),
        ds("kpng", "example.com/kpng:0.1.0", 3),
        ds("kube-proxy-old", "registry.k8s.io/kube-proxy@sha256:abc", 0),
        ds("kube-proxy-patched", "example.com/kpng:0.1.0", 3),
      ],
    };
    assert.deepEqual(kubeProxyDaemonSets(list), ["kube-proxy"]);
    assert.deepEqual(kubeProxyDaemonSets({}), []);
  });

  it("is a warning naming it; an API error is an info line, never a failure", async () => {
    const lines: { level: number; msg: string; daemonSets?: string[] }[] = [];
    const log = pino({ level: "info" }, { write: (l: string) => lines.push(JSON.parse(l)) });
    const asked: string[] = [];
    await warnIfKubeProxyRuns(async (path) => {
      asked.push(path);
      return { items: [ds("kube-proxy", "registry.k8s.io/kube-proxy:v1.35.0", 1)] };
    }, log);
    assert.deepEqual(asked, [DAEMONSETS_PATH]);
    assert.deepEqual(lines[0]?.daemonSets, ["kube-system/kube-proxy"]);
    assert.equal(lines[0]?.level, 40);
    await warnIfKubeProxyRuns(async () => {
      throw new Error("403 Forbidden");
    }, log);
    assert.equal(lines[1]?.level, 30);
    assert.match(lines[1]?.msg ?? "", /could not check/);
  });
});
