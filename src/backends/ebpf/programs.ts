// The program half of the eBPF runner: creates and pins the maps, loads and pins the programs,
// attaches them to the cgroup tree, all with bpftool (argv only, a deadline on every call). Pins
// live under `<bpf-root>/kpng/`; cgroup attachments outlive kpng, so traffic keeps resolving while
// it restarts. `ensure` is idempotent: on a restart it finds everything in place and changes
// nothing; after someone removed a pin or detached a program it puts back only what is missing.
// Programs loaded against maps it created, or found unattached at start, are attached only by
// `attach`, once the caller has written the maps: until then the programs attached before go on
// with the maps they hold.

import { existsSync, mkdirSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import type { ExecResult } from "../../host/exec.ts";
import { execVia, execViaWithInput, type SmallSpawner } from "../../host/small-spawner.ts";
import { HOOKS, type Hook, MAP_KEYS, MAPS, programName } from "./layout.ts";
import { mapPinPath, pinnedMapLayout } from "./maps.ts";
import { COOKIE_BYTES, UDP_DESTROY_OBJECT, UDP_GONE_MAP, udpDestroyPins } from "./udp-destroy.ts";

export interface ProgramLoader {
  /**
   * Puts back whatever is missing (maps, programs, attachments); returns what it did. Programs
   * loaded against maps it created, or unattached at its first call, are left for attach() (it
   * reports ATTACH_AFTER_WRITE).
   */
  ensure(): Promise<string[]>;
  /** Attaches the programs ensure() left unattached, if any; returns what it did. */
  attach(): Promise<string[]>;
  /** What is missing or detached; empty when everything is in place. Cheap: one bpftool call. */
  check(): Promise<string[]>;
  /** Detaches kpng's programs from the cgroup and removes every pin under `kpng/`. */
  remove(): Promise<string[]>;
  /**
   * Pins the UDP socket iterator if it is missing; never throws. Apart from ensure(): the
   * balancing programs never wait for it, nor fail for it.
   */
  ensureUdpDestroy?(): Promise<string[]>;
}

export interface LoaderSettings {
  readonly bpfRoot: string;
  readonly cgroupRoot: string;
  /** The compiled programs (build/kpng.bpf.o). */
  readonly object: string;
  readonly serviceEntries: number;
  readonly backendEntries: number;
  readonly affinityEntries: number;
  readonly reverseEntries: number;
  readonly bpftool?: string;
}

const TIMEOUT_MS = 10_000;
/** Each try of the iterator's load after a failure costs a repair (a full sync): a few only. */
const MAX_UDP_DESTROY_TRIES = 5;

/** How ensure() reports a map it created (any entries the old one held are gone). */
export const CREATED_MAP = "created map";

/**
 * How ensure() reports programs left for attach(): new maps are empty, and at a start the pinned
 * maps may be those of a start that ended before writing them. Attached, they would resolve no
 * Service, where the programs attached before still serve the maps they hold.
 */
export const ATTACH_AFTER_WRITE = "the programs attach once the maps are written";

/** How ensure() reports a pinned map of another layout that it replaces. */
const UNPINNED_OTHER_LAYOUT = "unpinned a map of another kpng version's layout:";

/** How ensure() reports a pinned map of another size that it replaces. */
const UNPINNED_OTHER_SIZE = "unpinned a map of another size (--bpf-map-* changed),";

/** How ensure() reports the balancing map replaced with its partner (a frontend names lists). */
const UNPINNED_PARTNER = "unpinned with the other balancing map:";

/** How ensure() reports that the UDP socket iterator cannot load here (reported once). */
export const NO_UDP_DESTROY = "connected UDP sockets are not cut";

/** How ensure() reports a load of the iterator that failed for now (the repair tries again). */
export const UDP_DESTROY_RETRY = "the UDP socket iterator is not pinned yet";

/** How `bpftool cgroup show` names each hook's attach type. */
const SHOWN_AS: Readonly<Record<Hook, string>> = {
  connect4: "cgroup_inet4_connect",
  connect6: "cgroup_inet6_connect",
  sendmsg4: "cgroup_udp4_sendmsg",
  sendmsg6: "cgroup_udp6_sendmsg",
  recvmsg4: "cgroup_udp4_recvmsg",
  recvmsg6: "cgroup_udp6_recvmsg",
  getpeername4: "cgroup_inet4_getpeername",
  getpeername6: "cgroup_inet6_getpeername",
  sock_release: "cgroup_inet_sock_release",
};

/** The inode of kpng's own network namespace: the node's. */
function ownNetns(): bigint {
  return statSync("/proc/self/ns/net", { bigint: true }).ino;
}

/** A number as bpftool reads a key or value: its bytes, little-endian (the programs' host order). */
function bytes(n: number | bigint, size: number): string[] {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return [...b.subarray(0, size)].map(String);
}

interface Attached {
  readonly id: number;
  readonly attach_type: string;
  readonly name: string;
}

/** Words that bpftool's batch reader takes as they are: no blanks, quotes, escapes or comments. */
const PLAIN_WORD = /^[\w./:=,+@-]+$/;

export class BpftoolLoader implements ProgramLoader {
  readonly #s: LoaderSettings;
  readonly #tool: string;
  /**
   * Starts bpftool: from kpng, each start would block kpng for as long as a fork of it takes,
   * which grows with its memory, and the probe asks bpftool every second (small-spawner.ts).
   */
  readonly #spawner: SmallSpawner | undefined;
  /** Why the UDP socket iterator cannot load on this kernel; once known, it is not tried again. */
  #noUdpDestroy: string | undefined;
  /** This loader pinned the iterator: check() reports it when it goes missing. */
  #udpDestroyPinned = false;
  /** Loads of the iterator in a row that failed for now; at MAX_UDP_DESTROY_TRIES kpng gives up. */
  #udpDestroyFailures = 0;
  /** The pinned maps' layouts and sizes were compared with this run's. */
  #pinsChecked = false;
  /** The hooks ensure() left for attach(). */
  #toAttach: readonly Hook[] = [];

  constructor(settings: LoaderSettings, options: { readonly spawner?: SmallSpawner } = {}) {
    this.#s = settings;
    this.#tool = settings.bpftool ?? "bpftool";
    this.#spawner = options.spawner;
  }

  get #dir(): string {
    return join(this.#s.bpfRoot, "kpng");
  }

  /**
   * Unpins maps whose keys or values are not what this version's programs read (pinned by another
   * kpng version), or whose size is not the one asked for (a --bpf-map-* flag changed, after a
   * full map: the kernel keeps a map's size for its life), so that ensure() creates them anew; the
   * programs attached meanwhile keep the old maps until they are replaced. A frontend names lists
   * in the backend map, so those two go together. Checked once per loader: the maps this one
   * creates are right.
   */
  #unpinMismatchedMaps(sizes: Readonly<Record<(typeof MAP_KEYS)[number], number>>): string[] {
    const why = new Map<(typeof MAP_KEYS)[number], string>();
    for (const m of MAP_KEYS) {
      const found = pinnedMapLayout(mapPinPath(this.#s.bpfRoot, m));
      if (found === undefined) continue;
      if (found.keySize !== MAPS[m].key || found.valueSize !== MAPS[m].value)
        why.set(m, UNPINNED_OTHER_LAYOUT);
      else if (found.maxEntries !== sizes[m])
        why.set(m, `${UNPINNED_OTHER_SIZE} ${found.maxEntries} entries, not ${sizes[m]}:`);
    }
    for (const [m, partner] of [
      ["services", "backends"],
      ["backends", "services"],
    ] as const)
      if (why.has(m) && !why.has(partner)) why.set(partner, UNPINNED_PARTNER);
    const done: string[] = [];
    for (const [m, reason] of why) {
      rmSync(mapPinPath(this.#s.bpfRoot, m), { force: true });
      done.push(`${reason} ${MAPS[m].name}`);
    }
    return done;
  }

  #progPin(hook: Hook): string {
    return join(this.#dir, "progs", programName(hook));
  }

  async ensure(): Promise<string[]> {
    const done: string[] = [];
    const commands: string[][] = [];
    let loadAll: string[] | undefined;
    mkdirSync(join(this.#dir, "maps"), { recursive: true });
    const sizes = {
      services: this.#s.serviceEntries,
      backends: this.#s.backendEntries,
      affinity: this.#s.affinityEntries,
      reverse: this.#s.reverseEntries,
      node: 1,
    };
    const first = !this.#pinsChecked;
    if (first) {
      done.push(...this.#unpinMismatchedMaps(sizes));
      this.#pinsChecked = true;
    }
    for (const m of MAP_KEYS) {
      const path = mapPinPath(this.#s.bpfRoot, m);
      if (existsSync(path)) continue;
      const d = MAPS[m];
      commands.push([
        "map",
        "create",
        path,
        "type",
        d.type,
        "key",
        String(d.key),
        "value",
        String(d.value),
        "entries",
        String(sizes[m]),
        "name",
        d.name,
        ...(d.noPrealloc ? ["flags", "1"] : []),
      ]);
      done.push(`${CREATED_MAP} ${d.name}`);
    }
    // Programs hold the maps they were loaded with: a re-created map needs them loaded again.
    const reload = done.length > 0 || !HOOKS.every((h) => existsSync(this.#progPin(h)));
    if (reload) {
      // Unpinning does not detach: programs attached now keep running until the new ones replace
      // them, below or in attach().
      rmSync(join(this.#dir, "progs"), { recursive: true, force: true });
      // The node's namespace, before the programs that read it: a failed write leaves the
      // programs unpinned, so the next sync comes back here. It never changes while kpng runs.
      commands.push([
        "map",
        "update",
        "pinned",
        mapPinPath(this.#s.bpfRoot, "node"),
        "key",
        ...bytes(0, 4),
        "value",
        ...bytes(ownNetns(), 8),
      ]);
      const reuse = MAP_KEYS.flatMap((m) => [
        "map",
        "name",
        MAPS[m].name,
        "pinned",
        mapPinPath(this.#s.bpfRoot, m),
      ]);
      loadAll = ["prog", "loadall", this.#s.object, join(this.#dir, "progs"), ...reuse];
      done.push("loaded programs");
    }
    const created = done.some((d) => d.startsWith(CREATED_MAP));
    await this.#runAll(commands);
    // On its own: bpftool 7.1's batch reports a `prog loadall` that succeeded as failed (it
    // leaves errno set, which the batch reader then takes for a read error).
    if (loadAll !== undefined) await this.#run(loadAll);
    const hooks = await this.#hooksToAttach(reload);
    this.#toAttach = created || first ? hooks : [];
    if (this.#toAttach.length > 0) done.push(ATTACH_AFTER_WRITE);
    else done.push(...(await this.#attachHooks(hooks)));
    return done;
  }

  async attach(): Promise<string[]> {
    const done = await this.#attachHooks(this.#toAttach);
    this.#toAttach = [];
    return done;
  }

  /**
   * The hooks whose program is not the pinned one: all of them when `reloaded`. Compared by id,
   * not by name: a program of an earlier load (a start that ended before its attach) has the same
   * name and other maps.
   */
  async #hooksToAttach(reloaded: boolean): Promise<Hook[]> {
    if (reloaded) return [...HOOKS];
    const attached = await this.#attached();
    const hooks: Hook[] = [];
    for (const hook of HOOKS) {
      const id = attached.get(SHOWN_AS[hook])?.id;
      if (id === undefined || id !== (await this.#pinnedProgramId(hook))) hooks.push(hook);
    }
    return hooks;
  }

  async #attachHooks(hooks: readonly Hook[]): Promise<string[]> {
    // override: replaces the program attached before in one step, so no connect goes unbalanced.
    await this.#runAll(
      hooks.map((hook) => [
        "cgroup",
        "attach",
        this.#s.cgroupRoot,
        hook,
        "pinned",
        this.#progPin(hook),
        "override",
      ]),
    );
    return hooks.map((hook) => `attached ${hook}`);
  }

  async #pinnedProgramId(hook: Hook): Promise<number> {
    const prog = JSON.parse(await this.#run(["-j", "prog", "show", "pinned", this.#progPin(hook)])) as {
      id: number;
    };
    return prog.id;
  }

  /**
   * Whether an iterator pinned before this process (a restart, an upgrade) keys its map as this
   * version writes it: one of another version would refuse every entry until it is replaced.
   */
  async #udpGoneMapFits(path: string): Promise<boolean> {
    try {
      const map = JSON.parse(await this.#run(["-j", "map", "show", "pinned", path])) as {
        bytes_key?: number;
      };
      return map.bytes_key === COOKIE_BYTES;
    } catch {
      return false;
    }
  }

  /**
   * The UDP socket iterator (udp-destroy.ts), from its own object: a kernel without
   * bpf_sock_destroy (before 6.5) refuses it, and the balancing programs above never depend on it.
   * `bpftool iter pin` loads the object and pins the iterator's link; the map it was loaded with
   * is then found through the link and pinned next to it, for kpng to fill.
   */
  async ensureUdpDestroy(): Promise<string[]> {
    const done: string[] = [];
    const pins = udpDestroyPins(this.#s.bpfRoot);
    if (this.#noUdpDestroy !== undefined) return done;
    if (existsSync(pins.iterator) && existsSync(pins.map)) {
      if (this.#udpDestroyPinned || (await this.#udpGoneMapFits(pins.map))) {
        this.#udpDestroyPinned = true;
        return done;
      }
      done.push("replaced the UDP socket iterator of another kpng version");
    }
    rmSync(pins.dir, { recursive: true, force: true });
    mkdirSync(pins.dir, { recursive: true });
    let loaded = false;
    try {
      await this.#run(["iter", "pin", join(dirname(this.#s.object), UDP_DESTROY_OBJECT), pins.iterator]);
      loaded = true;
      const link = JSON.parse(await this.#run(["-j", "link", "show", "pinned", pins.iterator])) as {
        prog_id: number;
      };
      const prog = JSON.parse(await this.#run(["-j", "prog", "show", "id", String(link.prog_id)])) as {
        map_ids?: number[];
      };
      for (const id of prog.map_ids ?? []) {
        const map = JSON.parse(await this.#run(["-j", "map", "show", "id", String(id)])) as { name: string };
        if (map.name !== UDP_GONE_MAP) continue;
        await this.#run(["map", "pin", "id", String(id), pins.map]);
        this.#udpDestroyPinned = true;
        this.#udpDestroyFailures = 0;
        done.push("pinned the UDP socket iterator");
        return done;
      }
      throw new Error(`the iterator holds no map ${UDP_GONE_MAP}`);
    } catch (err) {
      const reason = (err as Error).message;
      // Only the kernel refusing the object says it cannot load here. A bpftool that did not
      // answer in time, or pins removed while they were made, say nothing about the kernel: the
      // probe reports the iterator missing and the repair tries again.
      const refused = !loaded && !reason.includes("no answer within") && existsSync(pins.dir);
      rmSync(pins.dir, { recursive: true, force: true });
      if (refused || ++this.#udpDestroyFailures >= MAX_UDP_DESTROY_TRIES) {
        this.#noUdpDestroy = refused ? reason : `${MAX_UDP_DESTROY_TRIES} tries failed, the last: ${reason}`;
        done.push(`${NO_UDP_DESTROY}: ${this.#noUdpDestroy}`);
      } else {
        this.#udpDestroyPinned = true;
        done.push(`${UDP_DESTROY_RETRY}: ${reason}`);
      }
    }
    return done;
  }

  /**
   * Runs the commands in order, stopping at the first that fails. In one `bpftool batch` when
   * bpftool's batch reader would read every word back unchanged: each process costs kpng a turn of
   * its event loop, which a cold start's parsing holds for up to a second at a time, and a first
   * load is fifteen commands.
   */
  async #runAll(commands: readonly (readonly string[])[]): Promise<void> {
    if (commands.length > 1 && commands.every((c) => c.every((word) => PLAIN_WORD.test(word)))) {
      await this.#run(["batch", "file"], `${commands.map((c) => c.join(" ")).join("\n")}\n`);
      return;
    }
    for (const c of commands) await this.#run(c);
  }

  async check(): Promise<string[]> {
    const problems: string[] = [];
    for (const m of MAP_KEYS) {
      if (!existsSync(mapPinPath(this.#s.bpfRoot, m))) problems.push(`map ${MAPS[m].name} not pinned`);
    }
    for (const hook of HOOKS) if (!existsSync(this.#progPin(hook))) problems.push(`${hook} not pinned`);
    // Waiting for attach(), the programs attached before serve on: nothing to repair. By name
    // here, in one call a second; ensure() compares ids.
    if (this.#toAttach.length === 0) {
      const attached = await this.#attached();
      for (const hook of HOOKS)
        if (attached.get(SHOWN_AS[hook])?.name !== programName(hook)) problems.push(`${hook} not attached`);
    }
    const pins = udpDestroyPins(this.#s.bpfRoot);
    const wanted = this.#udpDestroyPinned && this.#noUdpDestroy === undefined;
    if (wanted && !(existsSync(pins.iterator) && existsSync(pins.map)))
      problems.push("UDP socket iterator not pinned");
    return problems;
  }

  async remove(): Promise<string[]> {
    const done: string[] = [];
    if (existsSync(this.#s.cgroupRoot)) {
      const attached = await this.#attached();
      for (const hook of HOOKS) {
        const a = attached.get(SHOWN_AS[hook]);
        if (a?.name !== programName(hook)) continue;
        await this.#run(["cgroup", "detach", this.#s.cgroupRoot, hook, "id", String(a.id)]);
        done.push(`detached ${hook}`);
      }
    }
    if (existsSync(this.#dir)) {
      rmSync(this.#dir, { recursive: true, force: true });
      done.push(`removed ${this.#dir}`);
    }
    return done;
  }

  async #attached(): Promise<Map<string, Attached>> {
    const out = await this.#run(["-j", "cgroup", "show", this.#s.cgroupRoot]);
    const list = (out.trim() === "" ? [] : JSON.parse(out)) as Attached[];
    return new Map(list.map((a) => [a.attach_type, a]));
  }

  /**
   * bpftool with `args`. With `input`, one more argument: a file holding the input when the small
   * process starts bpftool, else "-" with the input on stdin.
   */
  async #run(args: readonly string[], input?: string): Promise<string> {
    const r = await this.#exec([this.#tool, ...args], input);
    if (r.timedOut)
      throw new Error(`bpftool ${args.slice(0, 2).join(" ")}: no answer within ${TIMEOUT_MS} ms`);
    if (r.code !== 0) {
      const msg = r.stderr.split("\n").filter((l) => l && !/strict mode|legacy option|^If it used/.test(l));
      throw new Error(`bpftool ${args.join(" ")} failed: ${msg.join("; ") || `exit ${r.code}`}`);
    }
    return r.stdout;
  }

  #exec(argv: readonly string[], input: string | undefined): Promise<ExecResult> {
    const options = { timeoutMs: TIMEOUT_MS };
    return input === undefined
      ? execVia(this.#spawner, argv, options)
      : execViaWithInput(
          this.#spawner,
          argv,
          { tool: "bpftool", name: "batch", text: input, stdinArgument: "-" },
          options,
        );
  }
}
