// The line protocol spoken with a long-lived `nft -i`: one transaction per input line (nft
// commits each line as one atomic batch; ops.ts renders that line), each followed by a marker
// command that always fails.
// Success prints nothing, so the marker's error on stderr is the only sign that nft has finished
// the line before it; whatever nft printed on stderr before that error belongs to the transaction.

/** The marker for transaction number `seq`: listing a table that cannot exist. */
export function markerCommand(seq: number): string {
  return `list table ip kpng-sync-marker-${seq}`;
}

type MarkerScan =
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
