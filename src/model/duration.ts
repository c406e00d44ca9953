// Durations as kube-proxy and Go write them ("1s", "250ms", "1m30s"): flags, KubeProxyConfiguration
// fields and Service annotations all read them here.

// Every duration ends up in a timer, and Node's timers hold at most 2^31-1 ms (about 24.8
// days): a longer one fires after 1 ms, so a long resync period would become a busy loop. Longer
// durations are refused where they are parsed (flags, KubeProxyConfiguration, annotations).

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** The longest duration accepted: the largest timer (596h31m23.647s). */
export const MAX_DURATION_MS = 2 ** 31 - 1;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;

/** What makes sense for one flag: e.g. a resync period of 0 would spin. */
interface DurationBounds {
  /** Smallest accepted value in ms (inclusive). */
  readonly min?: number;
  /** Largest accepted value in ms (inclusive). */
  readonly max?: number;
}

/** "1s", "250ms", "1m30s", "596h31m23.647s": `ms` written back as Go would. */
function formatDuration(ms: number): string {
  if (ms === 0) return "0s";
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const rest = ms % 60_000;
  const s = rest === 0 ? "" : `${rest / 1000}s`;
  return `${h > 0 ? `${h}h` : ""}${h > 0 || m > 0 ? (m > 0 || s !== "" ? `${m}m` : "") : ""}${s}`;
}

/**
 * Milliseconds for a duration such as "1s", "250ms", "1m30s", "1.5s" or "0". Throws an Error that
 * shows the accepted forms when the text is not one, or the bound when it is outside `bounds`.
 */
export function parseDuration(text: string, bounds: DurationBounds = {}): number {
  const ms = parseAnyDuration(text);
  const max = Math.min(bounds.max ?? MAX_DURATION_MS, MAX_DURATION_MS);
  if (bounds.min !== undefined && ms < bounds.min) {
    throw new Error(`"${text}" is too short: it must be at least ${formatDuration(bounds.min)}`);
  }
  if (ms > max) throw new Error(`"${text}" is too long: it must be at most ${formatDuration(max)}`);
  return ms;
}

function parseAnyDuration(text: string): number {
  const trimmed = text.trim();
  if (trimmed === "0") return 0;
  let total = 0;
  let at = 0;
  PART.lastIndex = 0;
  while (at < trimmed.length) {
    PART.lastIndex = at;
    const match = PART.exec(trimmed);
    if (match === null) break;
    total += Number(match[1]) * (UNIT_MS[match[2] ?? ""] ?? Number.NaN);
    at = PART.lastIndex;
  }
  if (trimmed === "" || at !== trimmed.length || !Number.isFinite(total)) {
    throw new Error(
      `"${text}" is not a duration: write a number and a unit (ms, s, m, h), e.g. 1s, 250ms, 1m30s`,
    );
  }
  return Math.round(total);
}
