// The file source: a Kubernetes YAML/JSON file as the cluster. Each good read replaces the whole
// state; a broken file (syntax error, unreadable, missing) keeps the last good state, so saving a
// half-edited file never empties the proxy. A file rewritten in place is read only once it has
// stopped changing, and a read that empties it or drops most of its objects is used only after it
// stays that way: writers that truncate first (`kubectl get … > f`) never publish a partial state.
// A file replaced whole (rename, ConfigMap symlink swap) is a new inode and is read at once.

import { createHash } from "node:crypto";
import { type FSWatcher, readSync, unwatchFile, watch as watchDirectory, watchFile } from "node:fs";
import { stat } from "node:fs/promises";
import { basename, dirname } from "node:path";
import {
  type BoundedFile,
  openBoundedFile,
  readOpenedFile,
  releaseFileBytes,
} from "../../lib/bounded-read.ts";
import { EventLoopTurns } from "../../lib/event-loop-turns.ts";
import { sleep } from "../../lib/sleep.ts";
import type { ClusterSink, ClusterSource } from "../../model/global.ts";
import type { KubeKind } from "../../model/kube.ts";
import { reportInvalidObject } from "../../observability/invalid.ts";
import type { Logger } from "../../observability/log.ts";
import { type ClusterFileContents, parseClusterFile, parseJsonListInWindows } from "./parse.ts";
import { isSuspiciousShrink } from "./shrink.ts";

interface FileSourceOptions {
  readonly path: string;
  /** Re-read the file when it changes. */
  readonly watch: boolean;
  readonly log: Logger;
  /** Quiet time after the last change event before re-reading; editors write in bursts. */
  readonly debounceMs?: number;
  /** The stat-polling fallback, for file systems where directory watches miss events. */
  readonly pollIntervalMs?: number;
  /** How long an in-place rewrite must leave size and mtime unchanged before it is read. */
  readonly settleMs?: number;
  /** How long a read that empties the file or drops most objects must stay so before it is used. */
  readonly shrinkHoldMs?: number;
  /** A larger file is refused (--max-input-size). */
  readonly maxBytes?: number;
  /** The longest a change waits to be read (debounce and settle included). */
  readonly maxDelayMs?: number;
}

/** The default --max-input-size: a 100k-Service cluster's JSON fits several times over. */
export const DEFAULT_MAX_INPUT_BYTES = 512 * 1024 * 1024;

/** The settle time for files rewritten in place. */
const DEFAULT_SETTLE_MS = 500;
/**
 * The longest a change waits before its read starts, whatever the writer does: the debounce and
 * the settle time are cut short so that a file that never stops changing is still read. Reads are
 * promised every 2 s; the half second left covers the read itself and late timers on a busy node.
 */
const DEFAULT_MAX_DELAY_MS = 1500;
/** The further wait for a read that would empty the state or drop most of it. */
const DEFAULT_SHRINK_HOLD_MS = 2000;

interface FileIdentity {
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
}

async function identity(path: string): Promise<FileIdentity | undefined> {
  try {
    const s = await stat(path);
    return { ino: s.ino, size: s.size, mtimeMs: s.mtimeMs };
  } catch {
    return undefined;
  }
}

const sameContentStamp = (a: FileIdentity, b: FileIdentity) =>
  a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;

/**
 * What tells two reads of the file apart. A digest, not the text: a large JSON file is longer than
 * a JavaScript string can be, and the source should not hold a second copy of it.
 */
export function contentDigest(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("base64");
}

/** Files from this size on are read a window of this size at a time when they are a JSON List. */
const WINDOW_BYTES = 4 * 2 ** 20;

/**
 * A large JSON List read and parsed a window at a time (parseJsonListInWindows), with its digest
 * when `digest` is set (else ""); undefined when the file is small or anything else, to be read
 * whole.
 */
async function readListInWindows(
  path: string,
  { handle, size }: BoundedFile,
  maxBytes: number,
  signal: AbortSignal,
  digest: boolean,
): Promise<{ contents: ClusterFileContents; digest: string; bytes: number } | undefined> {
  if (size < WINDOW_BYTES) return undefined;
  const hash = digest ? createHash("sha256") : undefined;
  let bytes = 0;
  const { fd } = handle;
  const contents = await parseJsonListInWindows(
    (into, at, length, position) => readSync(fd, into, at, length, position),
    {
      fileName: path,
      windowBytes: WINDOW_BYTES,
      maxBytes,
      onBytes: (fresh) => {
        hash?.update(fresh);
        bytes += fresh.length;
      },
    },
    undefined,
    // Seconds at 100k Services: the backends' loaders, probes and health endpoints go on meanwhile.
    { turns: new EventLoopTurns(), signal },
  );
  return contents === undefined ? undefined : { contents, digest: hash?.digest("base64") ?? "", bytes };
}

/** The kinds a file holds, in the order they go to the sink: Services before their slices. */
const KINDS: readonly KubeKind[] = ["Service", "EndpointSlice", "Node", "ServiceCIDR"];

const objectCount = (c: ClusterFileContents) => c.services.length + c.endpointSlices.length + c.nodes.length;

export class FileSource implements ClusterSource {
  readonly #options: FileSourceOptions;
  readonly #debounceMs: number;
  readonly #settleMs: number;
  readonly #shrinkHoldMs: number;
  readonly #maxDelayMs: number;
  /** Aborted by stop(), to cut the settle waits short. */
  readonly #stopping = new AbortController();
  /** The inode last read: a different one means the file was replaced whole. */
  #readIno: number | undefined;
  #appliedCount = 0;
  #sink: ClusterSink | undefined;
  /**
   * The digest of the content last applied, which a reload compares with its own. A file read
   * once, without a watch, is never compared: its digest is not taken ("").
   */
  #appliedDigest: string | undefined;
  /** The last error reported, so a file that stays broken is reported once, not at every event. */
  #brokenBecause: string | undefined;
  #watcher: FSWatcher | undefined;
  #polling = false;
  #timer: NodeJS.Timeout | undefined;
  #reloading: Promise<void> | undefined;
  #reloadAgain = false;
  #stopped = false;
  /** When the oldest change not yet read was seen. */
  #pendingSince: number | undefined;

  constructor(options: FileSourceOptions) {
    this.#options = options;
    this.#debounceMs = options.debounceMs ?? 100;
    this.#settleMs = options.settleMs ?? DEFAULT_SETTLE_MS;
    this.#shrinkHoldMs = options.shrinkHoldMs ?? DEFAULT_SHRINK_HOLD_MS;
    this.#maxDelayMs = options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS;
  }

  /** Reads the file once; rejects with a message naming the file and the problem if it is broken. */
  async start(sink: ClusterSink): Promise<void> {
    this.#sink = sink;
    const read = await this.#read();
    // Stopped while reading: nothing is applied, and no watch is started after stop().
    if (this.#stopped) return;
    if (!read.ok) throw new Error(read.error);
    this.#apply(read.digest, read.contents);
    sink.synced();
    if (this.#options.watch) this.#startWatching();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stopping.abort();
    clearTimeout(this.#timer);
    this.#watcher?.close();
    this.#watcher = undefined;
    if (this.#polling) unwatchFile(this.#options.path);
    this.#polling = false;
    await this.#reloading;
  }

  #startWatching(): void {
    const { path, log } = this.#options;
    const name = basename(path);
    // Watching the directory, not the file, sees editors that save by writing a new file and
    // renaming it over the old one: a watch on the old file would go silent after that.
    try {
      this.#watcher = watchDirectory(dirname(path), (_event, changed) => {
        if (changed === null || changed === name) this.#scheduleReload();
      });
      this.#watcher.on("error", (err) => {
        log.warn({ err: err.message }, "directory watch failed; relying on polling");
        this.#watcher?.close();
        this.#watcher = undefined;
      });
    } catch (err) {
      log.warn({ err: (err as Error).message }, "cannot watch the directory; relying on polling");
    }
    watchFile(path, { interval: this.#options.pollIntervalMs ?? 1000 }, (now, before) => {
      if (now.mtimeMs !== before.mtimeMs || now.ino !== before.ino || now.size !== before.size) {
        this.#scheduleReload();
      }
    });
    this.#polling = true;
  }

  #scheduleReload(): void {
    if (this.#stopped) return;
    const now = performance.now();
    this.#pendingSince ??= now;
    // Each event restarts the debounce, but never past the oldest pending change's deadline.
    const left = this.#pendingSince + this.#maxDelayMs - now;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#startReload(), Math.max(0, Math.min(this.#debounceMs, left)));
  }

  #startReload(): void {
    // One reload at a time; events during a reload ask for one more afterwards.
    if (this.#reloading !== undefined) {
      this.#reloadAgain = true;
      return;
    }
    this.#reloading = this.#reload().finally(() => {
      this.#reloading = undefined;
      if (this.#reloadAgain && !this.#stopped) {
        this.#reloadAgain = false;
        this.#startReload();
      }
    });
  }

  /**
   * Waits until a file rewritten in place keeps its size and mtime for the settle time, or until
   * `deadline` (performance.now() time): then it is read as it is, with a log line.
   */
  async #settle(deadline: number): Promise<void> {
    let before = await identity(this.#options.path);
    // A missing file is reported by the read; a new inode was written before it was renamed here.
    if (before === undefined || before.ino !== this.#readIno) return;
    while (!this.#stopped) {
      const left = deadline - performance.now();
      if (left <= 0) {
        this.#options.log.warn(
          { file: this.#options.path, maxDelayMs: this.#maxDelayMs },
          "reading a file that is still changing (it must parse and keep most of its objects to be used)",
        );
        return;
      }
      await sleep(Math.min(this.#settleMs, left), this.#stopping.signal);
      const now = await identity(this.#options.path);
      if (now === undefined || sameContentStamp(before, now)) return;
      before = now;
    }
  }

  async #reload(): Promise<void> {
    const { path, log } = this.#options;
    const deadline = (this.#pendingSince ?? performance.now()) + this.#maxDelayMs;
    // Changes from now on are read by the next reload, with a deadline of their own.
    this.#pendingSince = undefined;
    await this.#settle(deadline);
    if (this.#stopped) return;
    let read = await this.#read();
    if (this.#stopped) return;
    // A read that empties the state or drops most of it is used only if it is still the file's
    // content after the hold time; anything else read meanwhile is handled as an ordinary change.
    while (read.ok && read.digest !== this.#appliedDigest) {
      const count = objectCount(read.contents);
      if (!isSuspiciousShrink(this.#appliedCount, count)) break;
      const heldDigest = read.digest;
      log.warn(
        { file: path, objects: count, before: this.#appliedCount, holdMs: this.#shrinkHoldMs },
        "the file lost most of its objects; waiting to see whether it stays that way",
      );
      await sleep(this.#shrinkHoldMs, this.#stopping.signal);
      await this.#settle(performance.now() + this.#settleMs);
      if (this.#stopped) return;
      read = await this.#read();
      if (this.#stopped) return;
      if (read.ok && read.digest === heldDigest) {
        log.warn(
          { file: path, objects: count, before: this.#appliedCount },
          "the file stayed that way; applying it",
        );
        break;
      }
    }
    if (!read.ok) {
      if (read.error !== this.#brokenBecause) {
        log.error({ file: path, error: read.error }, "cannot use the file; keeping the last good state");
      }
      this.#brokenBecause = read.error;
      return;
    }
    if (this.#brokenBecause !== undefined) log.info({ file: path }, "the file is readable again");
    this.#brokenBecause = undefined;
    if (read.digest === this.#appliedDigest) return;
    this.#apply(read.digest, read.contents);
  }

  async #read(): Promise<
    { ok: true; digest: string; contents: ClusterFileContents } | { ok: false; error: string }
  > {
    const { path, log } = this.#options;
    const maxBytes = this.#options.maxBytes ?? DEFAULT_MAX_INPUT_BYTES;
    let bytes: Buffer;
    try {
      this.#readIno = (await identity(path))?.ino;
      const file = await openBoundedFile(path, maxBytes, "--max-input-size");
      try {
        const windowed = await readListInWindows(
          path,
          file,
          maxBytes,
          this.#stopping.signal,
          this.#options.watch,
        );
        if (windowed !== undefined) {
          log.debug({ file: path, bytes: windowed.bytes, windowed: true }, "read the file");
          return { ok: true, digest: windowed.digest, contents: windowed.contents };
        }
        bytes = await readOpenedFile(path, file, maxBytes, "--max-input-size");
      } finally {
        await file.handle.close();
      }
    } catch (err) {
      return { ok: false, error: `cannot read ${path}: ${(err as Error).message}` };
    }
    log.debug({ file: path, bytes: bytes.length }, "read the file");
    const digest = this.#options.watch ? contentDigest(bytes) : "";
    const parsed = parseClusterFile(bytes, path);
    releaseFileBytes(bytes);
    return parsed.ok ? { ok: true, digest, contents: parsed.contents } : parsed;
  }

  #apply(digest: string, contents: ClusterFileContents): void {
    const { log, path } = this.#options;
    const sink = this.#sink;
    if (sink === undefined) return;
    for (const invalid of contents.invalid) reportInvalidObject(log, "file", invalid);
    for (const ignored of contents.ignored)
      log.debug({ object: ignored }, "ignoring an object of a kind a proxy does not read");
    for (const duplicate of contents.duplicates)
      log.warn({ object: duplicate }, "object defined twice; the last definition wins");
    for (const kind of KINDS) {
      const byKey = contents.byKey[kind];
      if (sink.replaceByKey !== undefined) sink.replaceByKey(kind, byKey);
      else sink.replace(kind, [...byKey.values()], [...byKey.keys()]);
    }
    this.#appliedDigest = digest;
    this.#appliedCount = objectCount(contents);
    log.info(
      {
        file: path,
        services: contents.services.length,
        endpointSlices: contents.endpointSlices.length,
        serviceCIDRs: contents.serviceCIDRs.length,
        nodes: contents.nodes.length,
        invalid: contents.invalid.length,
      },
      "read the cluster file",
    );
  }
}
