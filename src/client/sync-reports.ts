// A backend's sync reports on their way to the brain (localv1 WatchReq.Programmed): the latest
// one waits for a stream whose server reads them, and is sent again on each new stream, so a
// reconnect mid-handover still confirms what the backend holds.

import type { IPFamily } from "../model/kube.ts";

export interface SyncReport {
  /** The change set whose state was programmed: its Sync's instance id and revision. */
  readonly instanceId: string;
  readonly revision: number;
  readonly families: readonly IPFamily[];
}

type Write = (report: SyncReport) => void;

export class SyncReporter {
  #latest: SyncReport | undefined;
  #sent: SyncReport | undefined;
  #write: Write | undefined;

  /** Whether the backend has reported a sync: its requests then say it reports them. */
  get reporting(): boolean {
    return this.#latest !== undefined;
  }

  report(report: SyncReport): void {
    this.#latest = report;
    this.#flush();
  }

  /** A stream whose server reads reports: the latest is sent on it now, later ones as they come. */
  attach(write: Write): void {
    this.#write = write;
    this.#sent = undefined;
    this.#flush();
  }

  detach(write: Write): void {
    if (this.#write === write) this.#write = undefined;
  }

  #flush(): void {
    const report = this.#latest;
    if (report === undefined || this.#write === undefined || sameReport(report, this.#sent)) return;
    this.#sent = report;
    this.#write(report);
  }
}

/** A periodic resync reports the same state again: it goes out once per stream. */
function sameReport(a: SyncReport, b: SyncReport | undefined): boolean {
  return (
    b !== undefined &&
    a.instanceId === b.instanceId &&
    a.revision === b.revision &&
    a.families.length === b.families.length &&
    a.families.every((f) => b.families.includes(f))
  );
}
