// Leader election on a coordination.k8s.io/v1 Lease, as Kubernetes controllers do it: the holder
// renews the Lease every retry period; another replica takes it over once it has seen no renewal
// for a whole lease duration (measured on its own monotonic clock, so clocks need not agree and
// a wall-clock step changes nothing). A leader that cannot renew within the renew deadline stops
// leading at that deadline, even while a request still hangs: every request of a round is
// aborted when the deadline passes.

import { ApiStatusError } from "../kube/reflector.ts";
import type { KubeRequester } from "../kube/request.ts";
import { type Clock, systemClock } from "../model/clock.ts";
import type { Logger } from "../observability/log.ts";

export interface LeaderElectionOptions {
  readonly requester: KubeRequester;
  readonly namespace: string;
  readonly name: string;
  /** Unique per replica: the pod name and a random suffix. */
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly log: Logger;
  readonly onChange: (leading: boolean) => void;
  /** Monotonic time and timers (tests drive a fake one). */
  readonly clock?: Clock;
  /** Wall-clock time written into the Lease (acquireTime, renewTime). */
  readonly wallNow?: () => number;
}

interface Lease {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** MicroTime as the API server writes it. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace("Z", "000Z");
}

export class LeaderElector {
  readonly #o: LeaderElectionOptions;
  readonly #clock: Clock;
  readonly #wallNow: () => number;
  #leading = false;
  /** The holder and renewTime last seen, and when (monotonic) we saw them change. */
  #observed = { holder: "", version: "", at: 0 };
  #cancelTick: (() => void) | undefined;
  /** Fires at the renew deadline while leading; reset by every renewal. */
  #cancelDeadline: (() => void) | undefined;
  /** Aborts the round's requests: at the renew deadline, or on stop. */
  #roundAbort = new AbortController();
  #stopped = false;
  #round: Promise<void> | undefined;

  constructor(options: LeaderElectionOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#wallNow = options.wallNow ?? Date.now;
  }

  get leading(): boolean {
    return this.#leading;
  }

  start(): void {
    this.#tick();
  }

  /** Stops; a leader gives the Lease up so a successor need not wait out the lease duration. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#cancelTick?.();
    this.#roundAbort.abort();
    await this.#round;
    this.#cancelDeadline?.();
    if (this.#leading) {
      this.#setLeading(false);
      await this.#release().catch((err) =>
        this.#o.log.warn({ err: String(err) }, "could not release the lease"),
      );
    }
  }

  #tick(): void {
    if (this.#stopped) return;
    this.#roundAbort = new AbortController();
    const signal = this.#roundAbort.signal;
    this.#round = this.#tryAcquireOrRenew(signal)
      .catch((err) => {
        this.#o.log.warn({ err: String(err) }, "leader election round failed");
      })
      .then(() => {
        if (!this.#stopped) this.#cancelTick = this.#clock.after(this.#o.retryPeriodMs, () => this.#tick());
      });
  }

  /** While leading: the renew deadline from the last renewal; passing it ends leadership. */
  #armDeadline(): void {
    this.#cancelDeadline?.();
    this.#cancelDeadline = this.#clock.after(this.#o.renewDeadlineMs, () => {
      this.#cancelDeadline = undefined;
      if (!this.#leading) return;
      this.#o.log.error("could not renew the lease within the renew deadline; stopping to lead");
      this.#roundAbort.abort();
      this.#setLeading(false);
    });
  }

  #path(name?: string): string {
    const base = `/apis/coordination.k8s.io/v1/namespaces/${this.#o.namespace}/leases`;
    return name === undefined ? base : `${base}/${name}`;
  }

  #spec(previous: Lease["spec"] | undefined, now: number): Lease["spec"] {
    // The Lease carries wall-clock times for people and other tools; our decisions use the
    // monotonic clock only.
    const taking = previous?.holderIdentity !== this.#o.identity;
    return {
      holderIdentity: this.#o.identity,
      leaseDurationSeconds: Math.max(1, Math.round(this.#o.leaseDurationMs / 1000)),
      acquireTime: taking ? microTime(now) : (previous?.acquireTime ?? microTime(now)),
      renewTime: microTime(now),
      leaseTransitions: (previous?.leaseTransitions ?? 0) + (taking && previous?.holderIdentity ? 1 : 0),
    };
  }

  async #tryAcquireOrRenew(signal: AbortSignal): Promise<void> {
    const wall = this.#wallNow();
    let lease: Lease;
    try {
      lease = (await this.#o.requester.send({
        method: "GET",
        path: this.#path(this.#o.name),
        signal,
      })) as Lease;
    } catch (err) {
      if (!(err instanceof ApiStatusError && err.status === 404)) throw err;
      await this.#o.requester.send({
        method: "POST",
        path: this.#path(),
        body: {
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: { name: this.#o.name, namespace: this.#o.namespace },
          spec: this.#spec(undefined, wall),
        },
        signal,
      });
      this.#renewed(signal);
      return;
    }
    const now = this.#clock.now();
    const holder = lease.spec?.holderIdentity ?? "";
    // Any write of the Lease is a sign of life: its resourceVersion changes even when two
    // renewals fall within one tick of the renewTime's clock.
    const version = `${lease.metadata?.resourceVersion ?? ""}|${lease.spec?.renewTime ?? ""}`;
    if (holder !== this.#observed.holder || version !== this.#observed.version) {
      this.#observed = { holder, version, at: now };
    }
    const heldByOther = holder !== "" && holder !== this.#o.identity;
    if (heldByOther && now - this.#observed.at < this.#o.leaseDurationMs) {
      if (this.#leading) this.#setLeading(false);
      return;
    }
    try {
      await this.#o.requester.send({
        method: "PUT",
        path: this.#path(this.#o.name),
        body: { ...lease, spec: this.#spec(lease.spec, wall) },
        signal,
      });
    } catch (err) {
      // Someone else wrote first: they lead, or renewed; look again next round.
      if (err instanceof ApiStatusError && err.status === 409) return;
      throw err;
    }
    this.#renewed(signal);
  }

  #renewed(signal: AbortSignal): void {
    // A renewal that landed after the deadline passed does not revive the term: the next
    // round acquires anew (and the controller starts from fresh state).
    if (signal.aborted || this.#stopped) return;
    this.#armDeadline();
    if (!this.#leading) {
      this.#o.log.info(
        { lease: `${this.#o.namespace}/${this.#o.name}`, identity: this.#o.identity },
        "leading",
      );
      this.#setLeading(true);
    }
  }

  #setLeading(leading: boolean): void {
    if (!leading) {
      this.#cancelDeadline?.();
      this.#cancelDeadline = undefined;
    }
    this.#leading = leading;
    this.#o.onChange(leading);
  }

  async #release(): Promise<void> {
    const lease = (await this.#o.requester.send({ method: "GET", path: this.#path(this.#o.name) })) as Lease;
    if (lease.spec?.holderIdentity !== this.#o.identity) return;
    await this.#o.requester.send({
      method: "PUT",
      path: this.#path(this.#o.name),
      body: { ...lease, spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1 } },
    });
  }
}
