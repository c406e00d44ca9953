// `kpng explain NAMESPACE/NAME | IP:PORT[/PROTOCOL]`: reads the cluster once from one source
// (--input, --kubeconfig or --api), asks the brain's explanation (brain/explain.ts) for the node,
// and with --rules reads the backend's kernel objects and checks them against the brain's state.

import { Command, Option } from "commander";
import { z } from "zod";
import {
  explainService,
  narrowToAddress,
  parseAddressQuery,
  type ServiceExplanation,
} from "../brain/explain.ts";
import { computeLocalService } from "../brain/local-service.ts";
import { ClusterStore } from "../brain/store.ts";
import { apiClientOptions } from "../client/tls-options.ts";
import { addKubeConnectionOptions, kubeConnectionFlags } from "../kube/connection-flags.ts";
import type { ClusterSource } from "../model/global.ts";
import { objectKey } from "../model/kube.ts";
import type { LocalSinkPlugin, RawOptions, RunContext } from "../plugin/contracts.ts";
import { durationFlag, optionalText, parseOptionsWith } from "../plugin/options.ts";
import type { RulesReport } from "../plugin/rules-reader.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { apiSourcePlugin } from "../sources/api/api-source.ts";
import { fileSourcePlugin } from "../sources/file/plugin.ts";
import { kubeSourcePlugin } from "../sources/kube/plugin.ts";
import { renderExplanationTable } from "./explain-table.ts";

export interface ExplainRequest {
  /** "ns/name", or an address query. */
  readonly target: string;
  readonly nodeName: string;
  readonly servedProxyNames: readonly string[];
  readonly output: "table" | "json";
  readonly timeoutMs: number;
  /** Creates the source the cluster is read from, once. */
  readonly source: (ctx: RunContext, nodeName: string) => ClusterSource;
  /** --rules: the backend whose kernel objects are read. */
  readonly rules: { readonly sink: LocalSinkPlugin; readonly opts: unknown } | undefined;
}

/** Everything printed for one Service: the explanation, and with --rules the kernel's side. */
export interface ExplainResult extends ServiceExplanation {
  readonly rules?: RulesReport;
}

export function addExplainCommand(
  root: Command,
  localSinks: readonly LocalSinkPlugin[],
  defaultNodeName: string,
  /** Parses (a UsageError exits 2) and runs. */
  parseAndRun: (cmd: Command, parse: () => ExplainRequest) => Promise<void>,
): void {
  const readers = localSinks.filter((s) => s.rulesReader !== undefined);
  const cmd = new Command("explain")
    .description(
      "why a Service (NAMESPACE/NAME) or an address (IP:PORT[/PROTOCOL]) goes, or does not go, to each endpoint from one node",
    )
    .argument("<target>", "NAMESPACE/NAME of a Service, or IP:PORT[/PROTOCOL] it is reached on")
    .option("--node-name <name>", "the node whose view is explained", defaultNodeName)
    .option("-i, --input <file>", "read the cluster from a YAML or JSON file (as kpng file)")
    .option("--api <target>", "read the cluster from a running brain's watch API (unix:///path, host:port)")
    .option("--tls-cert <file>", "with --api: client certificate (PEM)")
    .option("--tls-key <file>", "with --api: client private key (PEM)")
    .option("--tls-ca <file>", "with --api: CA of the server certificate; enables TLS")
    .option(
      "--service-proxy-name <names>",
      'the service proxy names this node serves, comma-separated ("" for unlabelled Services)',
      "",
    )
    .addOption(
      new Option("-o, --output <format>", "table or json").choices(["table", "json"]).default("table"),
    )
    .option(
      "--rules <backend>",
      `read the kernel objects of the Service and check them against the brain (${readers.map(cleanupWord).join(", ")})`,
    )
    .option("--table-name <name>", "with --rules nft: the name of kpng's nft tables")
    .option("--nodeport-addresses <cidrs>", "with --rules: as given to the backend")
    .option("--cluster-cidr <cidrs>", "with --rules: as given to the backend")
    .option("--masquerade-all", "with --rules: as given to the backend")
    .option("--iptables-mode <mode>", "with --rules iptables: as given to the backend")
    .option("--bpf-root <dir>", "with --rules ebpf: the bpffs mount kpng pins under")
    .option("--timeout <duration>", "longest wait for the cluster to be read", "30s");
  addKubeConnectionOptions(cmd);
  cmd.action((target: string, _o: RawOptions, c: Command) =>
    parseAndRun(c, () => parseExplain(target, c.opts<RawOptions>(), readers)),
  );
  root.addCommand(cmd);
}

function cleanupWord(sink: LocalSinkPlugin): string {
  return sink.name.replace(/^to-/, "");
}

const explainFlags = z
  .object({
    nodeName: optionalText.refine((name) => name !== undefined, { message: "must not be empty" }),
    input: optionalText,
    api: optionalText,
    ...kubeConnectionFlags,
    serviceProxyName: z
      .string()
      .optional()
      .default("")
      .transform((names) => names.split(",").map((s) => s.trim())),
    output: z.enum(["table", "json"]).optional().default("table"),
    timeout: durationFlag(0, "").optional().default(30_000),
    rules: optionalText,
  })
  .transform((f, ctx) => {
    // The API server is named by --kubeconfig, or by --master alone.
    const kube = f.kubeconfig !== undefined || f.master !== undefined;
    const chosen = [
      ...(f.input !== undefined ? ["input" as const] : []),
      ...(f.api !== undefined ? ["api" as const] : []),
      ...(kube ? ["kubeconfig" as const] : []),
    ];
    if (chosen.length !== 1) {
      ctx.addIssue({
        code: "custom",
        message:
          "name exactly one source of the cluster: --input FILE, --kubeconfig FILE (or --master URL) or --api ADDRESS",
      });
      return z.NEVER;
    }
    return { ...f, nodeName: f.nodeName ?? "", source: chosen[0] ?? "kubeconfig" };
  });

function parseExplain(target: string, raw: RawOptions, readers: readonly LocalSinkPlugin[]): ExplainRequest {
  if (!/^[^/\s]+\/[^/\s]+$/.test(target) && parseAddressQuery(target) === undefined)
    throw new UsageError(`"${target}" is neither NAMESPACE/NAME nor IP:PORT[/PROTOCOL]`);
  const f = parseOptionsWith(explainFlags, raw);
  return {
    target,
    nodeName: f.nodeName,
    servedProxyNames: f.serviceProxyName,
    output: f.output,
    timeoutMs: f.timeout,
    source: sourceOf(f.source, raw),
    rules: rulesOf(f.rules, raw, readers),
  };
}

function sourceOf(which: string, raw: RawOptions): ExplainRequest["source"] {
  switch (which) {
    case "input": {
      const opts = fileSourcePlugin.parseOptions({ input: raw.input, watch: false });
      return (ctx, nodeName) => fileSourcePlugin.create(opts, { ...ctx, nodeName });
    }
    case "api": {
      const opts = apiClientOptions(raw);
      return (ctx, nodeName) => apiSourcePlugin.create(opts, { ...ctx, nodeName });
    }
    default: {
      // Every Service, whatever proxy it names: the explanation says which proxy serves it.
      const opts = kubeSourcePlugin.parseOptions({ ...raw, serviceProxyName: undefined });
      return (ctx, nodeName) => kubeSourcePlugin.create(opts, { ...ctx, nodeName, everyProxyName: true });
    }
  }
}

function rulesOf(
  want: string | undefined,
  raw: RawOptions,
  readers: readonly LocalSinkPlugin[],
): ExplainRequest["rules"] {
  if (want === undefined) return undefined;
  const sink = readers.find((s) => cleanupWord(s) === want || s.name === want);
  if (sink === undefined)
    throw new UsageError(
      `--rules: no backend "${want}"; choose one of: ${readers.map(cleanupWord).join(", ")}`,
    );
  // The backend's own flags that shape its rules, checked by the backend itself.
  const shaping = [
    "tableName",
    "nodeportAddresses",
    "clusterCidr",
    "masqueradeAll",
    "iptablesMode",
    "bpfRoot",
  ];
  const opts = sink.parseOptions(
    Object.fromEntries(shaping.filter((k) => raw[k] !== undefined).map((k) => [k, raw[k]])),
  );
  return { sink, opts };
}

/** Reads the cluster once: the source runs until it has listed everything, then stops. */
async function readCluster(request: ExplainRequest, ctx: RunContext): Promise<ClusterStore> {
  const store = new ClusterStore({ serviceProxyNames: "any", log: ctx.log.child({ component: "store" }) });
  const source = request.source(ctx, request.nodeName);
  const synced = new Promise<void>((resolve) => {
    const unsubscribe = store.subscribe(() => {
      unsubscribe();
      resolve();
    });
  });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the cluster was not read within ${request.timeoutMs} ms (--timeout)`)),
      request.timeoutMs,
    );
  });
  try {
    await source.start(store);
    await Promise.race([synced, timedOut]);
  } finally {
    clearTimeout(timer);
    await source.stop().catch(() => undefined);
  }
  return store;
}

/** The explanations the target names; throws when it names nothing. */
function explainTarget(store: ClusterStore, request: ExplainRequest): ServiceExplanation[] {
  const node = store.node(request.nodeName);
  const explain = (key: string) => {
    const service = store.service(key);
    if (service === undefined) return undefined;
    return explainService({
      service,
      slices: store.slicesOf(key),
      node,
      nodeName: request.nodeName,
      servedProxyNames: request.servedProxyNames,
    });
  };
  const query = parseAddressQuery(request.target);
  if (query === undefined) {
    const found = explain(request.target);
    if (found === undefined) throw new Error(`no Service ${request.target} in the cluster`);
    return [found];
  }
  const out: ServiceExplanation[] = [];
  for (const service of store.services()) {
    const x = explain(objectKey(service.metadata));
    const narrowed = x === undefined ? undefined : narrowToAddress(x, query);
    if (narrowed !== undefined) out.push(narrowed);
  }
  if (out.length === 0)
    throw new Error(`no Service is reached on ${request.target} from node ${request.nodeName}`);
  return out;
}

export async function runExplain(request: ExplainRequest, ctx: RunContext): Promise<void> {
  const store = await readCluster(request, ctx);
  const explanations = explainTarget(store, request);
  const results: ExplainResult[] = [];
  const reader = request.rules && (await request.rules.sink.rulesReader?.(request.rules.opts, ctx));
  const nodeView = {
    name: request.nodeName,
    labels: store.node(request.nodeName)?.metadata.labels ?? {},
  };
  for (const x of explanations) {
    if (reader === undefined || !x.proxied) {
      results.push(x);
      continue;
    }
    const service = store.service(x.service);
    const local = service && computeLocalService(service, store.slicesOf(x.service), nodeView);
    results.push(local === undefined ? x : { ...x, rules: await reader.read(local, ctx.signal) });
  }
  const text =
    request.output === "json"
      ? `${JSON.stringify(results.length === 1 ? results[0] : results, null, 2)}\n`
      : renderExplanationTable(results);
  await new Promise<void>((resolve) => process.stdout.write(text, () => resolve()));
  const drifted = results.filter((r) => (r.rules?.drift.length ?? 0) > 0).map((r) => r.service);
  if (drifted.length > 0) throw new Error(`the kernel differs from the brain for ${drifted.join(", ")}`);
}
