// A stream's session over any revisioned state (one node's local state, or the global state):
// the revision the client holds, and the next change set that brings it up to date — the
// delta when the revision is still in the state's log, else Reset and everything.

import { type Frame, resetFrame, syncFrame } from "./frames.ts";
import { type ChangeSet, type WatchSession, waitFor } from "./watch-stream.ts";

export interface Revisioned {
  /** Undefined until the state is complete (the store has synced). */
  readonly revision: number | undefined;
  onChange(listener: () => void): () => void;
  /** The Set/Delete ops from `revision` to now, or undefined when that revision is not in the log. */
  framesSince(revision: number): readonly Frame[] | undefined;
  /** The Set ops of the whole current state. */
  allFrames(): Frame[];
}

interface ResumeRequest {
  readonly InstanceID: string;
  readonly Revision: number;
}

export class RevisionSession<Req extends ResumeRequest> implements WatchSession<Req> {
  readonly #instanceId: string;
  /** Picks the state a request is about; a different state than before means starting over. */
  readonly #stateFor: (req: Req) => Revisioned;
  readonly #release: () => void;
  readonly #readsProgrammed: boolean;
  #state: Revisioned | undefined;
  #sent: number | undefined;
  #first = true;

  /** `readsProgrammed`: the stream reads Programmed reports, as each Sync tells the client. */
  constructor(
    instanceId: string,
    stateFor: (req: Req) => Revisioned,
    release: () => void = () => {},
    readsProgrammed = false,
  ) {
    this.#instanceId = instanceId;
    this.#stateFor = stateFor;
    this.#release = release;
    this.#readsProgrammed = readsProgrammed;
  }

  async next(req: Req, signal: AbortSignal): Promise<ChangeSet | undefined> {
    const state = this.#stateFor(req);
    if (state !== this.#state) {
      this.#state = state;
      this.#sent = undefined;
    }
    if (
      !(await waitFor(
        () => state.revision !== undefined,
        (l) => state.onChange(l),
        signal,
      ))
    )
      return undefined;
    if (this.#first && req.InstanceID === this.#instanceId && req.Revision > 0) {
      if (state.framesSince(req.Revision) !== undefined) this.#sent = req.Revision;
    }
    this.#first = false;
    for (;;) {
      const sent = this.#sent;
      if (sent === undefined) return this.#full(state);
      if (
        !(await waitFor(
          () => state.revision !== sent,
          (l) => state.onChange(l),
          signal,
        ))
      )
        return undefined;
      const revision = state.revision!;
      const frames = state.framesSince(sent);
      if (frames === undefined) return this.#full(state);
      this.#sent = revision;
      // A revision whose change is invisible on the wire is absorbed, as in kpng.
      if (frames.length > 0) return { frames: [...frames, this.#sync(revision)] };
    }
  }

  #full(state: Revisioned): ChangeSet {
    const revision = state.revision!;
    this.#sent = revision;
    const all = state.allFrames();
    const frames = new Array<Frame>(all.length + 2);
    frames[0] = resetFrame(this.#instanceId);
    for (let i = 0; i < all.length; i++) frames[i + 1] = all[i]!;
    frames[all.length + 1] = this.#sync(revision);
    return { frames };
  }

  #sync(revision: number): Frame {
    return syncFrame(this.#instanceId, revision, this.#readsProgrammed);
  }

  close(): void {
    this.#release();
  }
}
