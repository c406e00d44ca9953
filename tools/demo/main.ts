// `npm start`: kpng end to end on this machine, no cluster needed.
//
// As root it builds a private network (network namespaces: a node, one pod per endpoint of the
// example cluster, a client pod and an external client), runs
// `kpng file --input examples/cluster.yaml to-local to-nft --node-name node-1` on the node, sends
// requests to the Services' ClusterIPs, NodePorts, external IPs and load-balancer IPs, shows which
// pod answered each, then shows a Service with a fallback selector moving to its fallback pods
// and back, and deletes everything again (also on Ctrl-C or error).
// Without root it prints the node-local state kpng computes (`to-json --once`) instead.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { EXTERNAL_IPV4, EXTERNAL_IPV6 } from "../netns/addresses.ts";
import { runCommand } from "../netns/exec.ts";
import { netnsUnavailableReason, removeLeftoverNamespaces } from "../netns/netns.ts";
import type { ProbeRequest } from "../netns/probe.ts";
import { probeFrom } from "../netns/probe-from.ts";
import type { Spawned } from "../netns/spawned.ts";
import { Topology } from "../netns/topology.ts";
import { type DemoPlan, type DemoTarget, planDemo, readClusterFile } from "./demo-plan.ts";
import { type FallbackStory, fallbackStories, switchFallback } from "./fallback-act.ts";
import { renderTable, type TargetOutcome } from "./report.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CLI = path.join(ROOT, "src/cli/main.ts");

interface DemoOptions {
  readonly input: string;
  readonly nodeName: string;
  readonly requests: number;
  readonly readyTimeoutMs: number;
}

function parseOptions(args: readonly string[]): DemoOptions {
  const { values } = parseArgs({
    args: [...args],
    options: {
      input: { type: "string", default: path.join(ROOT, "examples/cluster.yaml") },
      "node-name": { type: "string", default: "node-1" },
      requests: { type: "string", default: "4" },
      "ready-timeout": { type: "string", default: "30" },
    },
  });
  const requests = Number(values.requests);
  const readySeconds = Number(values["ready-timeout"]);
  if (!Number.isInteger(requests) || requests < 1 || requests > 100) {
    throw new Error(`--requests must be 1-100, got ${values.requests}`);
  }
  if (!(readySeconds > 0)) throw new Error(`--ready-timeout must be a number of seconds`);
  return {
    input: path.relative(process.cwd(), path.resolve(values.input)) || ".",
    nodeName: values["node-name"],
    requests,
    readyTimeoutMs: readySeconds * 1000,
  };
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  // Registered first so it runs before the safety net's handler, which deletes the namespaces
  // and exits.
  process.once("SIGINT", () => {
    say("\ninterrupted: cleaning up");
    if (process.listenerCount("SIGINT") === 0) process.exit(130);
  });
  const reason =
    process.getuid?.() === 0
      ? ((await netnsUnavailableReason()) ?? (await nftUnavailableReason()))
      : "not root";
  if (reason !== undefined) {
    say(
      reason === "not root"
        ? "The nft demo needs root to create network namespaces."
        : `The nft demo cannot run here: ${reason}`,
    );
    say(`Showing instead the node-local state kpng computes for ${opts.nodeName}:\n`);
    return runJsonDump(opts);
  }
  return runNftDemo(opts);
}

/** The nft backend drives the `nft` command, which a fresh machine may not have yet. */
async function nftUnavailableReason(): Promise<string | undefined> {
  try {
    await runCommand(["nft", "--version"], { timeoutMs: 5000 });
    return undefined;
  } catch {
    return "the nft command is missing (install the nftables package)";
  }
}

/** `kpng file … to-local to-json --once`, its output passed through. */
function runJsonDump(opts: DemoOptions): Promise<number> {
  const args = ["file", "--input", opts.input, "to-local", "to-json", "--node-name", opts.nodeName, "--once"];
  say(`$ kpng ${args.join(" ")}`);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      stdio: "inherit",
      env: { KPNG_LOG_LEVEL: "warn", ...process.env },
    });
    child.on("error", (err) => {
      say(`could not run kpng: ${err.message}`);
      resolve(1);
    });
    child.on("close", (code) => resolve(code ?? 1));
  });
}

async function runNftDemo(opts: DemoOptions): Promise<number> {
  const text = readFileSync(opts.input, "utf8");
  const cluster = readClusterFile(text, opts.input);
  const plan = planDemo(cluster, opts.nodeName);
  if (plan.targets.length === 0) throw new Error(`${opts.input} has no Service to send requests to`);

  await removeLeftoverNamespaces(); // of earlier runs that were killed with SIGKILL
  let started = performance.now();
  say(
    `Building the network: node ${opts.nodeName}, ${plan.pods.length} pods, a client pod, an external client…`,
  );
  const topology = await Topology.create({
    pods: plan.pods,
    ...(plan.nodeIPv4 === undefined ? {} : { nodeIPv4: plan.nodeIPv4 }),
    ...(plan.nodeIPv6 === undefined ? {} : { nodeIPv6: plan.nodeIPv6 }),
  });
  let kpng: Spawned | undefined;
  // kpng reads a copy, so that the fallback act can change it while kpng watches it.
  const dir = mkdtempSync(path.join(tmpdir(), "kpng-demo-"));
  const input = path.join(dir, path.basename(opts.input));
  writeFileSync(input, text);
  try {
    say(`  done in ${seconds(started)} (node ${topology.nodeIPv4} / ${topology.nodeIPv6}).`);
    const argv = ["file", "--input", input, "to-local", "to-nft", "--node-name", opts.nodeName];
    say(`Starting on the node: kpng ${argv.join(" ")}  (a copy of ${opts.input})`);
    started = performance.now();
    kpng = topology.node.spawn([process.execPath, CLI, ...argv], { name: "kpng" });
    await waitForRules(topology, kpng, plan, opts.readyTimeoutMs);
    say(`  Services answer after ${seconds(started)}.\n`);

    const outcomes = await sendRequests(topology, plan.targets, opts.requests);
    say(`${opts.requests} requests per target. "client" is a pod on the node (${topology.client.ipv4},`);
    say(
      `${topology.client.ipv6}); "external" is a machine next to the node (${EXTERNAL_IPV4}, ${EXTERNAL_IPV6}).\n`,
    );
    say(renderTable(outcomes));
    say(
      "\ntimeout = dropped (e.g. no endpoint allowed for this traffic), refused = rejected (no endpoint at all).",
    );
    for (const story of fallbackStories(cluster)) {
      const target = plan.targets.find(
        (t) => t.service.startsWith(`${story.namespace}/${story.name}`) && t.from === "client",
      );
      if (target !== undefined) await fallbackAct(topology, story, target, text, input);
    }
    if (!kpng.running()) throw new Error("kpng stopped during the demo");
    return 0;
  } catch (err) {
    say(`\nThe demo failed: ${err instanceof Error ? err.message : String(err)}`);
    if (kpng !== undefined) say(kpng.describe());
    return 1;
  } finally {
    await kpng?.stop(5_000);
    await topology.destroy();
    rmSync(dir, { recursive: true, force: true });
    say("Deleted the namespaces.");
  }
}

/**
 * A Service with a fallback selector: its own pods serve, then stop being ready and its
 * fallback pods serve, then its own serve again. The file changes as the controller would
 * change the EndpointSlices; each step waits until the answers change, then shows them.
 */
async function fallbackAct(
  topology: Topology,
  story: FallbackStory,
  target: DemoTarget,
  text: string,
  input: string,
): Promise<void> {
  const service = `${story.namespace}/${story.name}`;
  say(
    `\n${service} has a fallback selector (fallback.kpng.io/selector). Its pods: ${story.primaryPods.join(", ")};`,
  );
  say(
    `its fallback pods: ${story.fallbackPods.join(", ")}. Requests to ${target.proto} ${target.host}:${target.port}:`,
  );
  const steps = [
    { fallback: false, what: "its own pod is ready, the fallback slices inactive", pods: story.primaryPods },
    {
      fallback: true,
      what: "its own pod is not ready: the fallback slices are active",
      pods: story.fallbackPods,
    },
    {
      fallback: false,
      what: "ready again, after the return delay: back to its own pod",
      pods: story.primaryPods,
    },
  ];
  for (const step of steps) {
    writeFileSync(`${input}.tmp`, switchFallback(text, story, step.fallback));
    renameSync(`${input}.tmp`, input);
    const started = performance.now();
    const answered = await answersFrom(topology, target, step.pods, 15_000);
    const names = [...new Set(answered)].join(", ") || "nobody";
    say(`  ${step.what}: answered by ${names} (after ${seconds(started)})`);
  }
}

/** Sends requests until every answer comes from one of `pods` (or the deadline passes). */
async function answersFrom(
  topology: Topology,
  target: DemoTarget,
  pods: readonly string[],
  timeoutMs: number,
): Promise<string[]> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const results = await probeFrom(
      topology.client.ns,
      Array.from({ length: 4 }, () => request(target, 500)),
      { concurrency: 4 },
    );
    const names = results.map((r) => (r.ok ? (r.reply?.name ?? "?") : r.failure));
    if (names.every((n) => pods.includes(n)) || performance.now() > deadline) return names;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Polls the ClusterIPs from the client pod until one answers (the rules are in place). */
async function waitForRules(
  topology: Topology,
  kpng: Spawned,
  plan: DemoPlan,
  timeoutMs: number,
): Promise<void> {
  const probes = plan.targets.filter((t) => t.from === "client").map((t) => request(t, 300));
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (!kpng.running()) throw new Error("kpng exited before any Service answered");
    const results = await probeFrom(topology.client.ns, probes, { concurrency: 64 });
    if (results.some((r) => r.ok)) return;
    if (performance.now() > deadline) {
      throw new Error(`no Service answered within ${timeoutMs / 1000} s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Sends `count` requests to every target, from the client pod or the external client. */
async function sendRequests(
  topology: Topology,
  targets: readonly DemoTarget[],
  count: number,
): Promise<TargetOutcome[]> {
  const run = async (from: DemoTarget["from"]): Promise<TargetOutcome[]> => {
    const mine = targets.filter((t) => t.from === from);
    const requests = mine.flatMap((t) => Array.from({ length: count }, () => request(t, 1_000)));
    const ns = from === "client" ? topology.client.ns : topology.external;
    const results = await probeFrom(ns, requests, { concurrency: 64 });
    return mine.map((target, i) => ({ target, results: results.slice(i * count, (i + 1) * count) }));
  };
  const [client, external] = await Promise.all([run("client"), run("external")]);
  const byTarget = new Map([...client, ...external].map((o) => [o.target, o]));
  return targets.flatMap((t) => byTarget.get(t) ?? []);
}

function request(t: DemoTarget, timeoutMs: number): ProbeRequest {
  return { proto: t.proto, host: t.host, port: t.port, timeoutMs };
}

function seconds(since: number): string {
  return `${((performance.now() - since) / 1000).toFixed(1)} s`;
}

function say(text: string): void {
  process.stdout.write(`${text}\n`);
}

try {
  process.exitCode = await main();
} catch (err) {
  say(`kpng demo: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
