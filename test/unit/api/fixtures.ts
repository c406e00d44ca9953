// Builders for local states and a controllable feed, shared by the API and client tests.

import { type Frame, opItemsOf } from "../../../src/api/frames.ts";
import { OpItem } from "../../../src/api/gen/api/localv1/api.ts";
import type { WireOp } from "../../../src/client/watch.ts";
import {
  type LocalEndpoint,
  type LocalService,
  type LocalServicePort,
  type LocalState,
  type LocalStateFeed,
  withFamilyEndpoints,
} from "../../../src/model/local.ts";
import { PackedEndpoint } from "../../../src/model/packed-endpoint.ts";
import { type LocalServiceOverrides, localService } from "../../support/local-service.ts";

/** An endpoint as the brain and the client's decoder make it. */
export function endpoint(ip: string, port: number, over: Partial<LocalEndpoint> = {}): LocalEndpoint {
  const { local = false, ready = true, serving = true, terminating = false, nodeUnknown } = over;
  return new PackedEndpoint(ip, port, {
    local,
    ready,
    serving,
    terminating,
    nodeUnknown: nodeUnknown === true,
  });
}

export function servicePort(over: Partial<LocalServicePort> = {}): LocalServicePort {
  const internal = over.internalEndpoints ?? [];
  return withFamilyEndpoints({
    name: "http",
    protocol: "TCP",
    port: 80,
    nodePort: 0,
    hasEndpoints: internal.length > 0,
    endpointFamilies: internal.length > 0 ? ["IPv4"] : [],
    internalEndpoints: internal,
    externalEndpoints: internal,
    ...over,
  });
}

export function service(name: string, over: LocalServiceOverrides = {}): LocalService {
  return localService({
    name,
    clusterIPs: ["198.51.100.10"],
    ports: [servicePort({ internalEndpoints: [endpoint("192.0.2.1", 8080)] })],
    ...over,
  });
}

export function localState(node: string, revision: number, services: readonly LocalService[]): LocalState {
  return {
    node,
    revision,
    services: new Map(services.map((s) => [`${s.namespace}/${s.name}`, s])),
    serviceCIDRs: { IPv4: [], IPv6: [] },
  };
}

/** A brain stand-in: push states per node; feeds deliver the latest, as localStateFeed does. */
export class FakeBrain {
  readonly #states = new Map<string, LocalState>();
  readonly #listeners = new Map<string, Set<(s: LocalState) => void>>();

  push(state: LocalState): void {
    this.#states.set(state.node, state);
    for (const l of this.#listeners.get(state.node) ?? []) l(state);
  }

  state(node: string): LocalState | undefined {
    return this.#states.get(node);
  }

  /** Changes one node's state by replacing/removing services; returns the new state. */
  update(node: string, set: readonly LocalService[], remove: readonly string[] = []): LocalState {
    const prev = this.#states.get(node) ?? localState(node, 0, []);
    const services = new Map(prev.services);
    for (const s of set) services.set(`${s.namespace}/${s.name}`, s);
    for (const k of remove) services.delete(k);
    const next = { node, revision: prev.revision + 1, services, serviceCIDRs: { IPv4: [], IPv6: [] } };
    this.push(next);
    return next;
  }

  feed = (node: string): LocalStateFeed => ({
    subscribe: (listener) => {
      let set = this.#listeners.get(node);
      if (set === undefined) {
        set = new Set();
        this.#listeners.set(node, set);
      }
      const l = (s: LocalState) => void listener(s);
      set.add(l);
      const current = this.#states.get(node);
      if (current !== undefined) queueMicrotask(() => l(current));
      return () => set.delete(l);
    },
  });
}

/** Frames as a client receives them: its wire ops. */
export function wireOps(frames: readonly Frame[]): WireOp[] {
  return frames.flatMap(opItemsOf).map((item) => {
    const op = OpItem.decode(item).Op;
    if (op?.$case === "Set")
      return { op: "set", set: op.value.Ref!.Set, path: op.value.Ref!.Path, bytes: op.value.Bytes };
    if (op?.$case === "Delete") return { op: "delete", set: op.value.Set, path: op.value.Path };
    throw new Error("unexpected op");
  });
}
