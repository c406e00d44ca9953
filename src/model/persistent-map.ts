// An immutable map from strings that shares its unchanged parts between versions: a hash array
// mapped trie (32-way nodes, entries stored inline, compacted on delete). Setting or deleting a
// key copies one path of at most seven small nodes, so a new local state revision costs
// O(changed × log32 n) instead of a copy of every service. A batch of edits goes through an
// editor that changes the nodes it created in place, so building 100k entries does not copy.
//
// Iteration follows the keys' hashes, not insertion order: a consumer that needs an order sorts.

const BITS = 5;
const MASK = 0x1f;
/** Past this shift the 32-bit hash is used up: keys with equal hashes share a collision node. */
const MAX_SHIFT = 30;

/** Who may change a node in place: the editor that created it, while it is open. */
type Owner = { open: boolean };

interface TrieNode {
  /** One bit per slot holding an entry inline. */
  dataMap: number;
  /** One bit per slot holding a child node. */
  nodeMap: number;
  /** Entries as key, value pairs, then child nodes in reverse slot order. */
  content: unknown[];
  owner: Owner | undefined;
  /** Set on collision nodes (every key has this hash): content is key, value pairs only. */
  collisionHash?: number;
}

/** FNV-1a over the UTF-16 code units: stable across runs and processes. */
function hashOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function popcount(x: number): number {
  let v = x - ((x >>> 1) & 0x55555555);
  v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
  return (Math.imul((v + (v >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

const bitOf = (hash: number, shift: number): number => 1 << ((hash >>> shift) & MASK);

function newNode(dataMap: number, nodeMap: number, content: unknown[], owner: Owner | undefined): TrieNode {
  return { dataMap, nodeMap, content, owner };
}

const EMPTY_NODE: TrieNode = newNode(0, 0, [], undefined);

/** A copy of the node the owner may change, or the node itself when the owner made it. */
function editable(node: TrieNode, owner: Owner | undefined): TrieNode {
  if (owner !== undefined && node.owner === owner) return node;
  const copy = newNode(node.dataMap, node.nodeMap, node.content.slice(), owner);
  if (node.collisionHash !== undefined) copy.collisionHash = node.collisionHash;
  return copy;
}

const NOT_FOUND: unique symbol = Symbol("not found");

function lookup(root: TrieNode, key: string, hash: number): unknown {
  let node = root;
  let shift = 0;
  for (;;) {
    if (node.collisionHash !== undefined) {
      const c = node.content;
      for (let i = 0; i < c.length; i += 2) if (c[i] === key) return c[i + 1];
      return NOT_FOUND;
    }
    const bit = bitOf(hash, shift);
    if ((node.dataMap & bit) !== 0) {
      const i = 2 * popcount(node.dataMap & (bit - 1));
      return node.content[i] === key ? node.content[i + 1] : NOT_FOUND;
    }
    if ((node.nodeMap & bit) === 0) return NOT_FOUND;
    node = node.content[node.content.length - 1 - popcount(node.nodeMap & (bit - 1))] as TrieNode;
    shift += BITS;
  }
}

/** What an edit did to the size: +1 added, -1 removed, 0 replaced or nothing. */
interface Delta {
  size: number;
}

/** A node holding two entries whose hashes agree below `shift`. */
function pair(
  k1: string,
  v1: unknown,
  h1: number,
  k2: string,
  v2: unknown,
  h2: number,
  shift: number,
  owner: Owner | undefined,
): TrieNode {
  if (shift > MAX_SHIFT) {
    const node = newNode(0, 0, [k1, v1, k2, v2], owner);
    node.collisionHash = h1;
    return node;
  }
  const b1 = bitOf(h1, shift);
  const b2 = bitOf(h2, shift);
  if (b1 === b2) return newNode(0, b1, [pair(k1, v1, h1, k2, v2, h2, shift + BITS, owner)], owner);
  // Unsigned: slot 31's bit is negative as an int32.
  return b1 >>> 0 < b2 >>> 0
    ? newNode(b1 | b2, 0, [k1, v1, k2, v2], owner)
    : newNode(b1 | b2, 0, [k2, v2, k1, v1], owner);
}

function insert(
  node: TrieNode,
  key: string,
  hash: number,
  value: unknown,
  shift: number,
  owner: Owner | undefined,
  delta: Delta,
): TrieNode {
  if (node.collisionHash !== undefined) {
    const c = node.content;
    for (let i = 0; i < c.length; i += 2) {
      if (c[i] !== key) continue;
      if (c[i + 1] === value) return node;
      const out = editable(node, owner);
      out.content[i + 1] = value;
      return out;
    }
    const out = editable(node, owner);
    out.content.push(key, value);
    delta.size = 1;
    return out;
  }
  const bit = bitOf(hash, shift);
  if ((node.dataMap & bit) !== 0) {
    const i = 2 * popcount(node.dataMap & (bit - 1));
    const k = node.content[i] as string;
    if (k === key) {
      if (node.content[i + 1] === value) return node;
      const out = editable(node, owner);
      out.content[i + 1] = value;
      return out;
    }
    // Two keys in one slot: the old entry moves down into a new child with the new one.
    const child = pair(k, node.content[i + 1], hashOf(k), key, value, hash, shift + BITS, owner);
    const out = editable(node, owner);
    out.content.splice(i, 2);
    out.dataMap ^= bit;
    out.nodeMap |= bit;
    out.content.splice(out.content.length - popcount(out.nodeMap & (bit - 1)), 0, child);
    delta.size = 1;
    return out;
  }
  if ((node.nodeMap & bit) !== 0) {
    const at = node.content.length - 1 - popcount(node.nodeMap & (bit - 1));
    const child = node.content[at] as TrieNode;
    const next = insert(child, key, hash, value, shift + BITS, owner, delta);
    if (next === child) return node;
    const out = editable(node, owner);
    out.content[at] = next;
    return out;
  }
  const out = editable(node, owner);
  out.content.splice(2 * popcount(node.dataMap & (bit - 1)), 0, key, value);
  out.dataMap |= bit;
  delta.size = 1;
  return out;
}

/** A node left with one entry and no child: its parent takes the entry inline. */
const isSingleEntry = (node: TrieNode): boolean =>
  node.nodeMap === 0 && node.content.length === 2 && (node.collisionHash !== undefined || node.dataMap !== 0);

function remove(
  node: TrieNode,
  key: string,
  hash: number,
  shift: number,
  owner: Owner | undefined,
  delta: Delta,
): TrieNode {
  if (node.collisionHash !== undefined) {
    const c = node.content;
    for (let i = 0; i < c.length; i += 2) {
      if (c[i] !== key) continue;
      const out = editable(node, owner);
      out.content.splice(i, 2);
      delta.size = -1;
      return out;
    }
    return node;
  }
  const bit = bitOf(hash, shift);
  if ((node.dataMap & bit) !== 0) {
    const i = 2 * popcount(node.dataMap & (bit - 1));
    if (node.content[i] !== key) return node;
    const out = editable(node, owner);
    out.content.splice(i, 2);
    out.dataMap ^= bit;
    delta.size = -1;
    return out;
  }
  if ((node.nodeMap & bit) === 0) return node;
  const at = node.content.length - 1 - popcount(node.nodeMap & (bit - 1));
  const child = node.content[at] as TrieNode;
  const next = remove(child, key, hash, shift + BITS, owner, delta);
  if (next === child) return node;
  const out = editable(node, owner);
  if (isSingleEntry(next)) {
    // Canonical form: an entry never sits alone in a child, so equal maps have equal shapes.
    out.content.splice(at, 1);
    out.nodeMap ^= bit;
    out.content.splice(2 * popcount(out.dataMap & (bit - 1)), 0, next.content[0], next.content[1]);
    out.dataMap |= bit;
  } else {
    out.content[at] = next;
  }
  return out;
}

/** What PersistentMap.fromColumns builds from. */
interface Columns {
  readonly keys: readonly string[];
  readonly values: readonly unknown[];
  readonly hashes: Uint32Array;
  /** Indexes into the columns, insertion order; each node sorts its range by slot as it is built. */
  readonly order: Uint32Array;
  readonly scratch: Uint32Array;
  /** Per trie level, where each of the 32 slots' indexes end in `order` (a counting sort's). */
  readonly ends: Uint32Array;
  /** Distinct keys counted so far. */
  size: number;
}

/**
 * The node of the indexes order[from, to), whose hashes agree below `shift`: the node setting the
 * same keys one by one in that order would give. A key sits inline at the shallowest level where
 * it has a slot alone; a collision node keeps its keys in the order they came; a key given twice
 * is where it came first, with its last value.
 */
function built(c: Columns, from: number, to: number, shift: number): TrieNode {
  const { keys, values, hashes, order, scratch, ends } = c;
  if (shift > MAX_SHIFT) {
    const content: unknown[] = [];
    for (let i = from; i < to; i++) {
      const at = order[i] as number;
      let k = 0;
      while (k < content.length && content[k] !== keys[at]) k += 2;
      if (k === content.length) c.size++;
      content[k] = keys[at];
      content[k + 1] = values[at];
    }
    const node = newNode(0, 0, content, undefined);
    node.collisionHash = hashes[order[from] as number] as number;
    return node;
  }
  // A stable counting sort of the range by slot, through `scratch`.
  const base = (shift / BITS) * 32;
  ends.fill(0, base, base + 32);
  for (let i = from; i < to; i++) {
    const slot = base + (((hashes[order[i] as number] as number) >>> shift) & MASK);
    ends[slot] = (ends[slot] as number) + 1;
  }
  let start = from;
  for (let slot = base; slot < base + 32; slot++) {
    const count = ends[slot] as number;
    ends[slot] = start;
    start += count;
  }
  for (let i = from; i < to; i++) {
    const at = order[i] as number;
    const slot = base + (((hashes[at] as number) >>> shift) & MASK);
    const into = ends[slot] as number;
    scratch[into] = at;
    ends[slot] = into + 1;
  }
  for (let i = from; i < to; i++) order[i] = scratch[i] as number;
  let dataMap = 0;
  let nodeMap = 0;
  const content: unknown[] = [];
  const children: TrieNode[] = [];
  for (let slot = 0, begin = from; slot < 32; slot++) {
    const end = ends[base + slot] as number;
    if (begin === end) continue;
    const only = lastOfOneKey(keys, order, begin, end);
    if (only !== undefined) {
      c.size++;
      dataMap |= 1 << slot;
      content.push(keys[only], values[only]);
    } else {
      nodeMap |= 1 << slot;
      children.push(built(c, begin, end, shift + BITS));
    }
    begin = end;
  }
  // Children go after the entries, in reverse slot order.
  for (let k = children.length - 1; k >= 0; k--) content.push(children[k]);
  return newNode(dataMap, nodeMap, content, undefined);
}

/** The last index of order[from, to) when they all name one key; undefined when they name several. */
function lastOfOneKey(
  keys: readonly string[],
  order: Uint32Array,
  from: number,
  to: number,
): number | undefined {
  const first = keys[order[from] as number];
  for (let i = from + 1; i < to; i++) if (keys[order[i] as number] !== first) return undefined;
  return order[to - 1];
}

/** Every node of the trie (about one per 20 entries), for iteration. */
function nodesOf(root: TrieNode): TrieNode[] {
  const out: TrieNode[] = [];
  const stack: TrieNode[] = [root];
  while (stack.length > 0) {
    const node = stack.pop()!;
    out.push(node);
    const c = node.content;
    for (let i = entryLength(node); i < c.length; i++) stack.push(c[i] as TrieNode);
  }
  return out;
}

/** How many slots of the node's content hold entries (key, value pairs) before its children. */
function entryLength(node: TrieNode): number {
  return node.collisionHash !== undefined ? node.content.length : 2 * popcount(node.dataMap);
}

/** Edits a map in place while open; `done()` seals the result as a new PersistentMap. */
class PersistentMapEditor<V> {
  readonly #base: PersistentMap<V>;
  #root: TrieNode;
  #size: number;
  readonly #owner: Owner = { open: true };
  readonly #delta: Delta = { size: 0 };

  constructor(base: PersistentMap<V>, root: TrieNode, size: number) {
    this.#base = base;
    this.#root = root;
    this.#size = size;
  }

  get size(): number {
    return this.#size;
  }

  get(key: string): V | undefined {
    const v = lookup(this.#root, key, hashOf(key));
    return v === NOT_FOUND ? undefined : (v as V);
  }

  set(key: string, value: V): this {
    this.#check();
    this.#delta.size = 0;
    this.#root = insert(this.#root, key, hashOf(key), value, 0, this.#owner, this.#delta);
    this.#size += this.#delta.size;
    return this;
  }

  delete(key: string): boolean {
    this.#check();
    this.#delta.size = 0;
    this.#root = remove(this.#root, key, hashOf(key), 0, this.#owner, this.#delta);
    this.#size += this.#delta.size;
    return this.#delta.size !== 0;
  }

  /**
   * Ends the edit: later edits of the result copy the nodes this editor made. An edit that
   * changed nothing returns the map it started from.
   */
  done(): PersistentMap<V> {
    this.#check();
    this.#owner.open = false;
    if (this.#root === this.#base.root) return this.#base;
    return PersistentMap.fromRoot<V>(this.#root, this.#size);
  }

  #check(): void {
    if (!this.#owner.open) throw new Error("PersistentMapEditor used after done()");
  }
}

export class PersistentMap<V> implements ReadonlyMap<string, V> {
  readonly #root: TrieNode;
  readonly size: number;

  private constructor(root: TrieNode, size: number) {
    this.#root = root;
    this.size = size;
  }

  static empty<V>(): PersistentMap<V> {
    return new PersistentMap<V>(EMPTY_NODE, 0);
  }

  static from<V>(entries: Iterable<readonly [string, V]>): PersistentMap<V> {
    const editor = PersistentMap.empty<V>().edit();
    for (const [k, v] of entries) editor.set(k, v);
    return editor.done();
  }

  /**
   * The map of keys[i] → values[i], as setting them one by one in that order would make it (a key
   * given twice keeps its last value), built at once: no node is made twice or grown.
   */
  static fromColumns<V>(keys: readonly string[], values: readonly V[]): PersistentMap<V> {
    if (keys.length === 0) return PersistentMap.empty<V>();
    const hashes = new Uint32Array(keys.length);
    const order = new Uint32Array(keys.length);
    for (let i = 0; i < keys.length; i++) {
      hashes[i] = hashOf(keys[i] as string);
      order[i] = i;
    }
    const columns: Columns = {
      keys,
      values,
      hashes,
      order,
      scratch: new Uint32Array(keys.length),
      ends: new Uint32Array(32 * (MAX_SHIFT / BITS + 1)),
      size: 0,
    };
    return new PersistentMap<V>(built(columns, 0, keys.length, 0), columns.size);
  }

  /** For PersistentMapEditor only. */
  get root(): TrieNode {
    return this.#root;
  }

  /** For PersistentMapEditor only. */
  static fromRoot<V>(root: TrieNode, size: number): PersistentMap<V> {
    return new PersistentMap<V>(root, size);
  }

  get(key: string): V | undefined {
    const v = lookup(this.#root, key, hashOf(key));
    return v === NOT_FOUND ? undefined : (v as V);
  }

  has(key: string): boolean {
    return lookup(this.#root, key, hashOf(key)) !== NOT_FOUND;
  }

  set(key: string, value: V): PersistentMap<V> {
    const delta: Delta = { size: 0 };
    const root = insert(this.#root, key, hashOf(key), value, 0, undefined, delta);
    return root === this.#root ? this : new PersistentMap<V>(root, this.size + delta.size);
  }

  delete(key: string): PersistentMap<V> {
    const delta: Delta = { size: 0 };
    const root = remove(this.#root, key, hashOf(key), 0, undefined, delta);
    return root === this.#root ? this : new PersistentMap<V>(root, this.size + delta.size);
  }

  /** An editor starting from this map; this map itself never changes. */
  edit(): PersistentMapEditor<V> {
    return new PersistentMapEditor<V>(this, this.#root, this.size);
  }

  // Iterators walk a list made in one pass: a generator resumed per entry cost ten times more.
  entries(): MapIterator<[string, V]> {
    const out: [string, V][] = [];
    for (const node of nodesOf(this.#root)) {
      const c = node.content;
      for (let i = 0, n = entryLength(node); i < n; i += 2) out.push([c[i] as string, c[i + 1] as V]);
    }
    return out.values();
  }

  keys(): MapIterator<string> {
    const out: string[] = [];
    for (const node of nodesOf(this.#root)) {
      const c = node.content;
      for (let i = 0, n = entryLength(node); i < n; i += 2) out.push(c[i] as string);
    }
    return out.values();
  }

  values(): MapIterator<V> {
    const out: V[] = [];
    for (const node of nodesOf(this.#root)) {
      const c = node.content;
      for (let i = 0, n = entryLength(node); i < n; i += 2) out.push(c[i + 1] as V);
    }
    return out.values();
  }

  /** Keys and values in iteration order, as two arrays filled in one pass (no pair per entry). */
  columns(): { keys: string[]; values: V[] } {
    const keys = new Array<string>(this.size);
    const values = new Array<V>(this.size);
    let at = 0;
    for (const node of nodesOf(this.#root)) {
      const c = node.content;
      for (let i = 0, n = entryLength(node); i < n; i += 2) {
        keys[at] = c[i] as string;
        values[at++] = c[i + 1] as V;
      }
    }
    return { keys, values };
  }

  [Symbol.iterator](): MapIterator<[string, V]> {
    return this.entries();
  }

  forEach(callback: (value: V, key: string, map: ReadonlyMap<string, V>) => void, thisArg?: unknown): void {
    for (const node of nodesOf(this.#root)) {
      const c = node.content;
      for (let i = 0, n = entryLength(node); i < n; i += 2)
        callback.call(thisArg, c[i + 1] as V, c[i] as string, this);
    }
  }

  get [Symbol.toStringTag](): string {
    return "PersistentMap";
  }
}
