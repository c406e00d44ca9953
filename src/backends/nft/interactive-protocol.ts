// The line protocol spoken with a long-lived `nft -i`: one transaction per input line (nft
// commits each line as one atomic batch), each followed by a marker command that always fails.
// Success prints nothing, so the marker's error on stderr is the only sign that nft has finished
// the line before it; whatever nft printed on stderr before that error belongs to the transaction.

/** Verbs a transaction line may use; anything else (list, include, quit…) goes to `nft -f`. */
const WRITE_VERB = /^(add|create|insert|replace|delete|destroy|flush|reset) /;

/**
 * The transaction text as one `nft -i` line (statements joined by `; `), or undefined when it
 * cannot safely be one line: a statement spanning several lines (`{` left open), a comment,
 * a quoted string, or a verb that is not a write.
 */
export function toTransactionLine(text: string): string | undefined {
  const statements: string[] = [];
  for (const raw of text.split("\n")) {
    const s = raw.trim();
    if (s === "") continue;
    if (/[#"\r\0]/.test(s) || !WRITE_VERB.test(s) || !bracesBalanced(s)) return undefined;
    statements.push(s);
  }
  return statements.join("; ");
}

function bracesBalanced(s: string): boolean {
  let depth = 0;
  for (const ch of s) {
    if (ch === "{") depth++;
    else if (ch === "}" && --depth < 0) return false;
  }
  return depth === 0;
}

/** The marker for transaction number `seq`: listing a table that cannot exist. */
export function markerCommand(seq: number): string {
  return `list table ip kpng-sync-marker-${seq}`;
}

export type MarkerScan =
  /** The marker's error is not complete on stderr yet. */
  | { readonly done: false }
  /** nft finished the transaction; `output` is what it printed for it ("" on success). */
  | { readonly done: true; readonly output: string; readonly rest: string };

/**
 * Looks for the marker's error in the stderr received so far: an `Error:` line, the echoed marker
 * command, and the caret line under it. The error text itself is not relied on (nft may add a
 * "did you mean" hint). `rest` is whatever followed, which should be empty.
 */
export function scanForMarker(stderr: string, marker: string): MarkerScan {
  const lines = stderr.split("\n");
  // The last element is an unterminated line (or ""): never treat it as complete.
  for (let i = 1; i + 2 < lines.length; i++) {
    if (lines[i] !== marker) continue;
    const error = lines[i - 1] ?? "";
    const caret = lines[i + 1] ?? "";
    if (!error.startsWith("Error:") || !/^ *\^+ *$/.test(caret)) continue;
    return {
      done: true,
      output: lines.slice(0, i - 1).join("\n"),
      rest: lines.slice(i + 2).join("\n"),
    };
  }
  return { done: false };
}

/** Whether a transaction's stderr output reports a failure nft understood (not garbage). */
export function isNftError(output: string): boolean {
  return output.split("\n").some((l) => l.startsWith("Error:"));
}
