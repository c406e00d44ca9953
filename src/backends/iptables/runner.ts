// The only place that runs iptables. Restore input goes to `iptables-restore --noflush` (argv
// array, no shell): on stdin, or in a file when the small process starts it; each table's COMMIT
// applies completely or not at all. Every call has a deadline: a stuck process is killed and
// reported as a failure.

import { CommandFailed, type ExecResult, firstLine } from "../../host/exec.ts";
import { execVia, execViaWithInput, type SmallSpawner } from "../../host/small-spawner.ts";
import { IP_FAMILIES } from "../../model/ip.ts";
import type { IPFamily } from "../../model/kube.ts";

export type Variant = "nft" | "legacy";
export type Table = "nat" | "filter" | "mangle";

export class IptablesError extends CommandFailed {}

export interface IptablesRunner {
  readonly variant: Variant;
  /** Applies restore input with --noflush; with `test`, only checks it (`--test`). */
  restore(family: IPFamily, text: string, options?: { readonly test?: boolean }): Promise<void>;
  /** `iptables-save -t <table>`. */
  save(family: IPFamily, table: Table): Promise<string>;
  /** Whether `chain` holds at least one rule (`iptables -S chain 1`); false when it is missing. */
  hasRules(family: IPFamily, table: Table, chain: string): Promise<boolean>;
  /** Whether `chain` holds the rule `spec` (`iptables -C chain …`); false when it is missing. */
  hasRule(family: IPFamily, table: Table, chain: string, spec: string): Promise<boolean>;
  /** `iptables -S chain -v`: its rules with their counters (`-c packets bytes`); "" when it is missing. */
  rulesWithCounters(family: IPFamily, table: Table, chain: string): Promise<string>;
}

/** A look at one chain: short, it runs every few seconds. */
const CHECK_TIMEOUT_MS = 5000;

/** One restore of 10k services (20k chains) takes seconds on a loaded two-core machine; a margin. */
const DEFAULT_TIMEOUT_MS = 180_000;

/** `iptables-nft-restore`, `ip6tables-legacy-save`, `iptables-nft`, … */
export function binary(family: IPFamily, variant: Variant, tool: "" | "restore" | "save"): string {
  const base = `${family === "IPv4" ? "iptables" : "ip6tables"}-${variant}`;
  return tool === "" ? base : `${base}-${tool}`;
}

/** Every program the iptables backend may start: both variants, both families. */
export const IPTABLES_BINARIES: readonly string[] = (["nft", "legacy"] as const).flatMap((variant) =>
  IP_FAMILIES.flatMap((family) =>
    (["", "restore", "save"] as const).map((tool) => binary(family, variant, tool)),
  ),
);

/** Runs the real binaries of one variant. `prefix` may wrap them, e.g. `["ip", "netns", "exec", "ns1"]`. */
export class ExecIptablesRunner implements IptablesRunner {
  readonly variant: Variant;
  readonly #prefix: readonly string[];
  readonly #timeoutMs: number;
  /**
   * Starts the commands: from kpng, each start would block kpng for as long as a fork of it
   * takes, which grows with its memory, and the rules are checked every few seconds
   * (small-spawner.ts). Restore input then goes in a file, named as the last argument.
   */
  readonly #spawner: SmallSpawner | undefined;

  constructor(
    variant: Variant,
    options: { prefix?: readonly string[]; timeoutMs?: number; spawner?: SmallSpawner } = {},
  ) {
    this.variant = variant;
    this.#prefix = options.prefix ?? [];
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#spawner = options.spawner;
  }

  async #exec(argv: readonly string[], stdin: string, timeoutMs: number): Promise<ExecResult> {
    const options = { timeoutMs };
    const r =
      stdin === ""
        ? await execVia(this.#spawner, argv, options)
        : await execViaWithInput(
            this.#spawner,
            argv,
            { tool: "iptables", name: "restore", text: stdin },
            options,
          );
    if (r.timedOut) throw new IptablesError(`${argv[0] ?? "iptables"} timed out after ${timeoutMs} ms`, "");
    return r;
  }

  async restore(family: IPFamily, text: string, options: { readonly test?: boolean } = {}): Promise<void> {
    const args = ["-w", "5", "--noflush", ...(options.test ? ["--test"] : [])];
    const r = await this.#exec(
      [...this.#prefix, binary(family, this.variant, "restore"), ...args],
      text,
      this.#timeoutMs,
    );
    if (r.code !== 0) throw new IptablesError(`iptables-restore failed: ${firstLine(r.stderr)}`, r.stderr);
  }

  async save(family: IPFamily, table: Table): Promise<string> {
    const r = await this.#exec(
      [...this.#prefix, binary(family, this.variant, "save"), "-t", table],
      "",
      this.#timeoutMs,
    );
    if (r.code !== 0) throw new IptablesError(`iptables-save failed: ${firstLine(r.stderr)}`, r.stderr);
    return r.stdout;
  }

  async hasRules(family: IPFamily, table: Table, chain: string): Promise<boolean> {
    const r = await this.#check(family, table, ["-S", chain, "1"]);
    return r.code === 0 && r.stdout.trim() !== "";
  }

  async hasRule(family: IPFamily, table: Table, chain: string, spec: string): Promise<boolean> {
    const r = await this.#check(family, table, ["-C", chain, ...spec.split(" ")]);
    return r.code === 0;
  }

  async rulesWithCounters(family: IPFamily, table: Table, chain: string): Promise<string> {
    const r = await this.#check(family, table, ["-S", chain, "-v"]);
    return r.code === 0 ? r.stdout : "";
  }

  /**
   * Exit 1 means "no such chain or rule"; so does exit 2 naming a missing jump target (`-C` of
   * a jump to a deleted chain); anything else but 0 is a failure to check.
   */
  async #check(family: IPFamily, table: Table, args: readonly string[]): Promise<ExecResult> {
    const argv = [...this.#prefix, binary(family, this.variant, ""), "-w", "5", "-t", table, ...args];
    const r = await this.#exec(argv, "", CHECK_TIMEOUT_MS);
    if (r.code === 2 && /does not exist|Couldn't load target/.test(r.stderr)) return { ...r, code: 1 };
    if (r.code !== 0 && r.code !== 1)
      throw new IptablesError(
        `${argv.slice(this.#prefix.length).join(" ")}: ${firstLine(r.stderr)}`,
        r.stderr,
      );
    return r;
  }
}
