// A mistake in what the user asked for (a bad flag or option value). The CLI prints its message
// and exits 2 before anything starts; every other error is a runtime failure (exit 1).

export class UsageError extends Error {
  override readonly name = "UsageError";
}
