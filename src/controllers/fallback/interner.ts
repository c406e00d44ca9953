// One copy of each repeated string (namespaces, node names, label keys and values, port names):
// 50k pods repeat a few hundred distinct values, and each parse makes new copies of them.

/** Distinct strings kept at most; then the table starts over (values unique per pod must not pile up). */
const MAX_ENTRIES = 65_536;

export class Interner {
  #table = new Map<string, string>();

  intern(value: string): string {
    const known = this.#table.get(value);
    if (known !== undefined) return known;
    if (this.#table.size >= MAX_ENTRIES) this.#table = new Map();
    this.#table.set(value, value);
    return value;
  }

  /** A label map whose keys and values are the interned copies. */
  labels(labels: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const [key, value] of Object.entries(labels)) out[this.intern(key)] = this.intern(value);
    return out;
  }
}
