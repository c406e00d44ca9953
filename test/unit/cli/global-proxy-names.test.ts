// `kpng <source> … <global-sink>`: a sink that serves every service proxy name (to-api
// --every-service-proxy-name) makes the source read every Service, while its own view stays the
// source's name; any other global sink keeps the source's narrow selection.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { Invocation } from "../../../src/cli/invocation.ts";
import { runInvocation } from "../../../src/cli/run.ts";
import type { ClusterView } from "../../../src/model/global.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import type { GlobalSinkContext, SourceContext, SourcePlugin } from "../../../src/plugin/contracts.ts";
import { svc } from "../brain/fixtures.ts";

const LABEL = "service.kubernetes.io/service-proxy-name";

/** A source holding "web" (unlabelled) and "old" (legacy); records the context it was created with. */
function recordingSource(): { plugin: SourcePlugin; contexts: SourceContext[] } {
  const contexts: SourceContext[] = [];
  const plugin: SourcePlugin = {
    name: "fake",
    description: "fake",
    addOptions: () => {},
    parseOptions: () => ({}),
    create: (_opts, ctx) => {
      contexts.push(ctx);
      return {
        async start(sink) {
          sink.replace("Service", [
            svc({ name: "web" }),
            svc({ name: "old", labels: { [LABEL]: "legacy" } }),
          ]);
          sink.synced();
        },
        async stop() {},
      };
    },
  };
  return { plugin, contexts };
}

const names = (view: ClusterView) => [...view.services()].map((s) => s.metadata.name).sort();

async function runGlobal(every: boolean) {
  const source = recordingSource();
  let seen: { cluster: string[]; legacy: string[] | undefined; ctx: GlobalSinkContext } | undefined;
  const invocation: Invocation = {
    form: "global",
    source: source.plugin,
    sourceOpts: {},
    sink: {
      name: "to-fake",
      description: "fake",
      addOptions: () => {},
      parseOptions: () => ({}),
      everyProxyName: () => every,
      async run(cluster, _opts, ctx) {
        seen = {
          cluster: names(cluster),
          legacy: ctx.remoteBackends && names(ctx.remoteBackends.view("legacy", "n1")),
          ctx,
        };
      },
    },
    sinkOpts: {},
    serviceProxyName: "",
    serviceCIDRs: undefined,
  };
  await runInvocation(invocation, { signal: new AbortController().signal, log: silentLogger });
  return { seen: seen!, sourceCtx: source.contexts[0]! };
}

test("a sink serving every proxy name: the source reads every Service, the sink's own view is its name's", async () => {
  const { seen, sourceCtx } = await runGlobal(true);
  assert.equal(sourceCtx.everyProxyName, true);
  assert.deepEqual(seen.cluster, ["web"]);
  assert.deepEqual(seen.legacy, ["old"]);
  assert.equal(seen.ctx.serviceProxyName, "");
});

test("any other global sink keeps the source's own name only (the narrow label selector)", async () => {
  const { seen, sourceCtx } = await runGlobal(false);
  assert.equal(sourceCtx.everyProxyName, false);
  assert.deepEqual(seen.cluster, ["web"]);
  assert.equal(seen.legacy, undefined);
});
