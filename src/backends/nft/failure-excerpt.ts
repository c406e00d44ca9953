// What a log line shows of a failed nft transaction: the statement nft complained about with a
// few lines around it, and how much was left out. A transaction can be megabytes (31k Services:
// 866 KB); logging it whole at every retry fills disks, and the operator needs only the culprit.

/** Lines kept on each side of the failing one. */
const CONTEXT_LINES = 2;
/** Longest line kept whole; longer ones (an `nft -i` transaction is one line) are cut around the error. */
const MAX_LINE_CHARS = 400;

interface TransactionExcerpt {
  /** The failing statement and its neighbours, or the first lines when nft named no line. */
  readonly excerpt: string;
  /** 1-based line of the failing statement, when nft's message names one. */
  readonly line?: number;
  readonly totalLines: number;
  readonly totalBytes: number;
  /** Bytes of the transaction not shown. */
  readonly omittedBytes: number;
}

/** nft names the place of an error as `/dev/stdin:LINE:COL-COL: Error: …` (or `<cmdline>:…`). */
const POSITION = /^[^\s:]*:(\d+):(\d+)(?:-(\d+))?: Error:/m;

export function excerptTransaction(text: string, stderr: string): TransactionExcerpt {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const totalBytes = Buffer.byteLength(text);
  const position = POSITION.exec(stderr);
  const at = position ? Number(position[1]) : undefined;
  const column = position ? Number(position[2]) : 1;
  const index = at !== undefined && at >= 1 && at <= lines.length ? at - 1 : undefined;
  const from = index === undefined ? 0 : Math.max(0, index - CONTEXT_LINES);
  const to =
    index === undefined
      ? Math.min(lines.length, 1 + 2 * CONTEXT_LINES)
      : Math.min(lines.length, index + CONTEXT_LINES + 1);
  const shown = lines.slice(from, to).map((l, i) => cutLine(l, from + i === index ? column : 1));
  const excerpt = shown.join("\n");
  return {
    excerpt,
    ...(index === undefined ? {} : { line: index + 1 }),
    totalLines: lines.length,
    totalBytes,
    omittedBytes: Math.max(0, totalBytes - Buffer.byteLength(excerpt)),
  };
}

function cutLine(line: string, column: number): string {
  if (line.length <= MAX_LINE_CHARS) return line;
  const start = Math.max(0, Math.min(column - 1 - MAX_LINE_CHARS / 2, line.length - MAX_LINE_CHARS));
  const end = start + MAX_LINE_CHARS;
  return `${start > 0 ? "…" : ""}${line.slice(start, end)}${end < line.length ? "…" : ""}`;
}
