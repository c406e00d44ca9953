// When a cluster file that held objects suddenly holds none, or far fewer, the likeliest cause is
// a writer caught half-way (a shell `>` truncates first and writes later), not an operator who
// deleted most Services. Such a read is held back until it proves stable.

/** Whether going from `before` objects to `after` is a drop that must be confirmed before use. */
export function isSuspiciousShrink(before: number, after: number): boolean {
  if (before === 0) return false;
  if (after === 0) return true;
  // "Most of its objects at once": more than half gone, for files big enough for that to mean
  // something (a file of 3 losing 2 is an ordinary edit).
  return before >= 4 && after * 2 < before;
}
