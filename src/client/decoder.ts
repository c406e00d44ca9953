// Wire change sets → LocalState. Keeps the wire values it holds, rebuilds only the services a
// change set touched, and keeps the previous LocalService object when the rebuilt one is equal,
// so consumers can diff by identity as they do in-process. Like the brain, it shares unchanged
// parts between states and logs which services each revision changed.

import { isDeepStrictEqual } from "node:util";
import { Endpoint, NodeInfo, Service, ServiceCIDRs, Set as WireSet } from "../api/gen/api/localv1/api.ts";
import { decodeLocalService } from "../api/local-codec.ts";
import type { LocalService, LocalState } from "../model/local.ts";
import { ServiceChangeLog } from "../model/local-changes.ts";
import { PersistentMap } from "../model/persistent-map.ts";
import type { WireChangeSet } from "./watch.ts";

interface Held {
  service: Service | undefined;
  readonly endpoints: Map<string, Endpoint>;
}

export class LocalStateDecoder {
  readonly #node: string;
  #held = new Map<string, Held>();
  #services: PersistentMap<LocalService> = PersistentMap.empty();
  readonly #changeLog = new ServiceChangeLog();
  #serviceCIDRs: readonly string[] = [];
  /** The Node's facts; undefined until the server sends them (an older server never does). */
  #nodeInfo: NodeInfo | undefined;
  #revision = 0;

  constructor(nodeName: string) {
    this.#node = nodeName;
  }

  get state(): LocalState {
    return {
      node: this.#node,
      revision: this.#revision,
      services: this.#services,
      serviceCIDRs: this.#serviceCIDRs,
      ...(this.#nodeInfo && { nodeIPs: this.#nodeInfo.PrimaryIPs, nodePodCIDRs: this.#nodeInfo.PodCIDRs }),
      changeLog: this.#changeLog,
    };
  }

  /** Applies one change set; returns the same LocalState object's content when nothing changed. */
  apply(changeSet: WireChangeSet): { state: LocalState; changed: boolean } {
    const dirty = new Set<string>();
    let serviceCIDRs = this.#serviceCIDRs;
    let nodeInfo = this.#nodeInfo;
    if (changeSet.reset) {
      for (const key of this.#held.keys()) dirty.add(key);
      this.#held = new Map();
      serviceCIDRs = [];
      nodeInfo = undefined;
    }
    for (const op of changeSet.ops) {
      if (op.set === WireSet.ServiceCIDRsSet) {
        serviceCIDRs = op.op === "set" ? ServiceCIDRs.decode(op.bytes).CIDRs : [];
        continue;
      }
      if (op.set === WireSet.NodeInfoSet) {
        nodeInfo = op.op === "set" ? NodeInfo.decode(op.bytes) : undefined;
        continue;
      }
      const parts = op.path.split("/");
      const key = `${parts[0]}/${parts[1]}`;
      if (op.set === WireSet.ServicesSet && parts.length === 2) {
        const held = this.#hold(key);
        held.service = op.op === "set" ? Service.decode(op.bytes) : undefined;
      } else if (op.set === WireSet.EndpointsSet && parts.length === 3) {
        const held = this.#hold(key);
        if (op.op === "set") held.endpoints.set(parts[2]!, Endpoint.decode(op.bytes));
        else held.endpoints.delete(parts[2]!);
      } else {
        continue;
      }
      dirty.add(key);
    }
    const next = this.#services.edit();
    const changedKeys = new Set<string>();
    let changed = false;
    if (!isDeepStrictEqual(serviceCIDRs, this.#serviceCIDRs)) {
      this.#serviceCIDRs = serviceCIDRs;
      changed = true;
    }
    if (!isDeepStrictEqual(nodeInfo, this.#nodeInfo)) {
      this.#nodeInfo = nodeInfo;
      changed = true;
    }
    for (const key of dirty) {
      const held = this.#held.get(key);
      if (held?.service === undefined) {
        if (held !== undefined && held.endpoints.size === 0) this.#held.delete(key);
        if (next.delete(key)) changedKeys.add(key);
        continue;
      }
      const rebuilt = decodeLocalService(held.service, held.endpoints.values());
      const previous = next.get(key);
      if (previous !== undefined && isDeepStrictEqual(previous, rebuilt)) continue;
      next.set(key, rebuilt);
      changedKeys.add(key);
    }
    this.#services = next.done();
    if (changed || changedKeys.size > 0) {
      this.#revision++;
      this.#changeLog.record(this.#revision, changedKeys);
      changed = true;
    }
    return { state: this.state, changed };
  }

  #hold(key: string): Held {
    let held = this.#held.get(key);
    if (held === undefined) {
      held = { service: undefined, endpoints: new Map() };
      this.#held.set(key, held);
    }
    return held;
  }
}
