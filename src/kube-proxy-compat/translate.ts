// KubeProxyConfiguration + kube-proxy flags → what kpng runs: the kube source's options, the
// backend (a local sink) and its options, named by their kpng flags, plus warnings. Pure.
// Every field's default and application is a row of the table in table.ts; this walks it.

import { parseDuration } from "../plugin/duration.ts";
import { type BackendChoice, backendForMode, type ProxyMode } from "./backend-choice.ts";
import type { ConfigValues } from "./config-file.ts";
import type { ParsedFlags } from "./flags.ts";
import { type ApplyContext, type FieldRow, TABLE } from "./table.ts";

/** One option of a kpng plug-in, named by its flag, and the field or flag it came from. */
export interface KpngOption {
  readonly flag: string;
  readonly value: string | boolean;
  readonly from: string;
  /** True when the value is kube-proxy's default (the field was not set). */
  readonly defaulted: boolean;
}

export interface Translation {
  readonly mode: ProxyMode;
  readonly source: { readonly name: "kube"; readonly options: readonly KpngOption[] };
  readonly sink: { readonly name: string; readonly options: readonly KpngOption[] };
  /** oom_score_adj for the process (kube-proxy's default: -999). */
  readonly oomScoreAdj: number;
  /** The log level kube-proxy's verbosity maps to. */
  readonly logLevel: "info" | "debug" | "trace";
  /** The effective configuration: every field given, else its default (for /configz). */
  readonly effective: Readonly<Record<string, unknown>>;
  readonly warnings: readonly string[];
}

/** `pick` chooses the backend for the mode; tests pass one that knows backends this build lacks. */
export function translate(
  file: ConfigValues,
  flags: ParsedFlags,
  pick: (mode: string) => BackendChoice = backendForMode,
): Translation {
  const raw = new Map([...file, ...flags.overrides]);
  const row = new Map(TABLE.map((r) => [r.field, r]));
  const given = (field: string) =>
    raw.has(field) && (row.get(field)?.pointer === true || !isZero(raw.get(field)));
  const value = (field: string): unknown => {
    const r = row.get(field);
    return given(field) ? raw.get(field) : r?.defaultFrom ? r.defaultFrom(value) : r?.default;
  };
  const { mode, sink } = pick(typeof raw.get("mode") === "string" ? String(raw.get("mode")).trim() : "");
  const source: KpngOption[] = [];
  const sinkOptions: KpngOption[] = [];
  const warnings: string[] = [];
  const effective: Record<string, unknown> = {};
  if (flags.master !== undefined)
    source.push({ flag: "--master", value: flags.master, from: "--master", defaulted: false });
  for (const r of TABLE) {
    if (r.type === "object") continue;
    const v = value(r.field);
    if (v !== undefined) effective[r.field] = v;
    if (!appliesIn(r, mode)) {
      if (!isZero(raw.get(r.field)) && v !== r.default)
        warnings.push(`${r.field}: applies to another proxy mode than ${mode}; ignored`);
      continue;
    }
    const add = (into: KpngOption[]) => (flag: string, val: string | boolean) =>
      into.push({ flag, value: val, from: r.field, defaulted: !given(r.field) });
    const c: ApplyContext = {
      mode,
      value,
      given,
      source: add(source),
      sink: add(sinkOptions),
      warn: (w) => warnings.push(w),
    };
    r.apply?.(v, c, given(r.field));
  }
  // Two proxies on one node fight: replacing kube-proxy means removing what it left.
  sinkOptions.push({ flag: "--cleanup-kube-proxy", value: true, from: "(kpng kube-proxy)", defaulted: true });
  const verbosity = Number(value("logging.verbosity") ?? 0);
  return {
    mode,
    source: { name: "kube", options: source },
    sink: { name: sink, options: sinkOptions },
    oomScoreAdj: Number(value("oomScoreAdj")),
    logLevel: verbosity >= 6 ? "trace" : verbosity >= 3 ? "debug" : "info",
    effective,
    warnings,
  };
}

function appliesIn(r: FieldRow, mode: ProxyMode): boolean {
  return r.modes === undefined || r.modes.includes(mode);
}

/** "", false, 0, "0s", [] and {} are what kubeadm writes for "not set". */
function isZero(value: unknown): boolean {
  if (value === undefined || value === null || value === "" || value === false || value === 0) return true;
  if (typeof value === "string") {
    try {
      return parseDuration(value) === 0;
    } catch {
      return false;
    }
  }
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === "object") return Object.keys(value).length === 0;
  return false;
}
