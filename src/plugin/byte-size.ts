// Sizes on the command line, written as Kubernetes quantities are: "1048576", "512Ki", "64Mi",
// "1Gi" (powers of 1024).

const UNIT: Readonly<Record<string, number>> = { "": 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };

/** Bytes for "64Mi" and the like; throws an Error showing the accepted forms. */
export function parseByteSize(text: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(text.trim());
  const bytes = m === null ? Number.NaN : Number(m[1]) * (UNIT[m[2] ?? ""] ?? Number.NaN);
  if (!Number.isSafeInteger(bytes) || bytes <= 0)
    throw new Error(`"${text}" is not a size: write a number of bytes, or with Ki, Mi or Gi (e.g. 512Mi)`);
  return bytes;
}
