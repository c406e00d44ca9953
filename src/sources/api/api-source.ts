// `kpng api --api <target> …`: a ClusterSource that replicates another brain's global state
// (globalv1, whole objects), so a central brain can fan out to brains on the nodes.

import { Set as WireSet } from "../../api/gen/api/localv1/api.ts";
import {
  decodeEndpointSliceInfo,
  decodeNodeInfo,
  decodeServiceCIDRInfo,
  decodeServiceInfo,
} from "../../api/global-codec.ts";
import type { TlsPaths } from "../../client/connection.ts";
import { type ApiClientFlags, addApiOptions, apiClientOptions } from "../../client/tls-options.ts";
import { type WireChangeSet, type WireOp, watchGlobal } from "../../client/watch.ts";
import type { ClusterSink, ClusterSource } from "../../model/global.ts";
import type { EndpointSlice, KubeKind, KubeObject, Node, Service, ServiceCIDR } from "../../model/kube.ts";
import { type Logger, silentLogger } from "../../observability/log.ts";
import type { SourcePlugin } from "../../plugin/contracts.ts";

/** The object key a globalv1 path names: "ns|name||" → "ns/name", "|node||" → "node", "ns|svc|slice|" → "ns/slice". */
function objectOfPath(set: WireSet, path: string): { kind: KubeKind; key: string } | undefined {
  const [ns = "", name = "", slice = ""] = path.split("|");
  if (set === WireSet.GlobalServiceInfos) return { kind: "Service", key: `${ns}/${name}` };
  if (set === WireSet.GlobalNodeInfos) return { kind: "Node", key: name };
  if (set === WireSet.GlobalEndpointSlices) return { kind: "EndpointSlice", key: `${ns}/${slice}` };
  if (set === WireSet.GlobalServiceCIDRs) return { kind: "ServiceCIDR", key: name };
  return undefined;
}

function decodeOp(op: Extract<WireOp, { op: "set" }>): KubeObject | undefined {
  if (op.set === WireSet.GlobalServiceInfos) return decodeServiceInfo(op.bytes);
  if (op.set === WireSet.GlobalNodeInfos) return decodeNodeInfo(op.bytes);
  if (op.set === WireSet.GlobalEndpointSlices) return decodeEndpointSliceInfo(op.bytes);
  if (op.set === WireSet.GlobalServiceCIDRs) return decodeServiceCIDRInfo(op.bytes);
  return undefined;
}

/** Applies globalv1 change sets to a ClusterSink: replace() per kind after a Reset, else upserts and deletes. */
export class GlobalChangeApplier {
  readonly #sink: ClusterSink;
  readonly #log: Logger;
  #synced = false;

  constructor(sink: ClusterSink, log: Logger = silentLogger) {
    this.#sink = sink;
    this.#log = log;
  }

  apply(changeSet: WireChangeSet): void {
    if (changeSet.reset) {
      const all = {
        Service: [] as Service[],
        EndpointSlice: [] as EndpointSlice[],
        Node: [] as Node[],
        ServiceCIDR: [] as ServiceCIDR[],
      };
      for (const op of changeSet.ops) {
        if (op.op !== "set") continue;
        const obj = this.#decode(op);
        if (obj !== undefined) (all[obj.kind] as KubeObject[]).push(obj);
      }
      this.#sink.replace("Service", all.Service);
      this.#sink.replace("EndpointSlice", all.EndpointSlice);
      this.#sink.replace("Node", all.Node);
      this.#sink.replace("ServiceCIDR", all.ServiceCIDR);
    } else {
      for (const op of changeSet.ops) {
        if (op.op === "set") {
          const obj = this.#decode(op);
          if (obj !== undefined) this.#sink.upsert(obj);
        } else {
          const target = objectOfPath(op.set, op.path);
          if (target !== undefined) this.#sink.delete(target.kind, target.key);
        }
      }
    }
    if (!this.#synced) {
      this.#synced = true;
      this.#sink.synced();
    }
  }

  #decode(op: Extract<WireOp, { op: "set" }>): KubeObject | undefined {
    try {
      return decodeOp(op);
    } catch (err) {
      this.#log.warn({ path: op.path, reason: (err as Error).message }, "skipping unreadable global value");
      return undefined;
    }
  }
}

interface ApiSourceOptions {
  readonly api: string;
  readonly tls?: TlsPaths;
  readonly log?: Logger;
}

function apiClusterSource(options: ApiSourceOptions): ClusterSource {
  const stop = new AbortController();
  let running: Promise<void> | undefined;
  return {
    async start(sink: ClusterSink): Promise<void> {
      const applier = new GlobalChangeApplier(sink, options.log);
      running = watchGlobal({
        api: options.api,
        tls: options.tls,
        signal: stop.signal,
        log: options.log,
        onChangeSet: (cs) => applier.apply(cs),
      });
    },
    async stop(): Promise<void> {
      stop.abort();
      await running;
    },
  };
}

export const apiSourcePlugin: SourcePlugin<ApiClientFlags> = {
  name: "api",
  description: "replicate the global state of another kpng brain (its to-api globalv1 API)",
  addOptions: addApiOptions,
  parseOptions: apiClientOptions,
  create(opts, ctx) {
    return apiClusterSource({ api: opts.api, tls: opts.tls, log: ctx.log });
  },
};
