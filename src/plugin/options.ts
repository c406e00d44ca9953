// Checking a plug-in's options with zod: one schema per plug-in, keyed by commander's camelCase
// option names, and the first problem turned into a UsageError that names the flag.

import { z } from "zod";
import type { RawOptions } from "./contracts.ts";
import { parseDuration } from "./duration.ts";
import { UsageError } from "./usage-error.ts";

/** `nodeportAddresses` → `--nodeport-addresses`. */
function flagOf(key: PropertyKey): string {
  return `--${String(key).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/** The schema's output for the raw options, or a UsageError naming the first bad flag. */
export function parseOptionsWith<S extends z.ZodType>(schema: S, raw: RawOptions): z.output<S> {
  const result = schema.safeParse(raw);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const key = issue?.path[0];
  const message = issue?.message ?? "invalid value";
  // A reader shared with other callers may name the flag itself.
  const named = key === undefined || message.startsWith(flagOf(key));
  throw new UsageError(named ? message : `${flagOf(key)}: ${message}`);
}

/**
 * A duration flag ("250ms", "1s", "1m30s", or milliseconds already parsed), at least `minMs`.
 * `why` says why smaller values make no sense for this flag.
 */
export function durationFlag(minMs: number, why: string) {
  return z.union([z.string(), z.number()]).transform((value, ctx) => {
    let ms: number;
    try {
      ms = typeof value === "number" ? value : parseDuration(value);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
      return z.NEVER;
    }
    if (ms < minMs) {
      ctx.addIssue({ code: "custom", message: `"${value}" is too short: ${why}` });
      return z.NEVER;
    }
    return ms;
  });
}

/**
 * A whole-number flag of at least `min` (commander hands text; the kube-proxy translation,
 * numbers). `what` names the unit in the message ("bytes"); `why` says why less makes no sense.
 */
export function wholeNumberFlag(fallback: number, min = 0, what = "", why = "") {
  return z
    .union([z.string(), z.number()])
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return fallback;
      const n = typeof v === "number" ? v : /^\d+$/.test(v.trim()) ? Number(v.trim()) : Number.NaN;
      if (Number.isSafeInteger(n) && n >= min) return n;
      const unit = what === "" ? "" : ` of ${what}`;
      ctx.addIssue({
        code: "custom",
        message: `"${String(v)}" is not a whole number${unit} of at least ${min}${why === "" ? "" : `: ${why}`}`,
      });
      return z.NEVER;
    });
}

/** A text flag that must be given and not be empty. */
export function requiredText(what: string) {
  return z.string({ error: `needs ${what}` }).refine((s) => s.trim() !== "", { message: `needs ${what}` });
}

/** A text flag that may be absent; empty or blank text counts as absent. */
export const optionalText = z
  .string()
  .optional()
  .transform((s) => (s === undefined || s.trim() === "" ? undefined : s.trim()));

/**
 * A value that `check` accepts (it throws with the reason otherwise), e.g. an address parser:
 * the schema keeps the value and reports the reason as the flag's problem.
 */
export function checkedBy<T>(check: (value: T) => unknown) {
  return (value: T, ctx: z.RefinementCtx) => {
    try {
      check(value);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
    }
  };
}

/**
 * The value `parse` makes of a flag's text (it throws with the reason otherwise), e.g. an
 * address reader: use as `.transform(parsedBy(parse))`; the reason becomes the flag's problem.
 */
export function parsedBy<I, T>(parse: (value: I) => T) {
  return (value: I, ctx: z.RefinementCtx): T => {
    try {
      return parse(value);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
      return z.NEVER;
    }
  };
}

/** A boolean switch; commander leaves it undefined when absent. */
export const switchFlag = z.boolean().optional().default(false);
