// A client the way kpng's Go client talks to the server: the .proto files loaded at run time by
// @grpc/proto-loader (no code of ours), plain grpc-js, field names and numbers from the protos.

import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const root = fileURLToPath(new URL("../../../", import.meta.url));

const definition = protoLoader.loadSync(["api/localv1/api.proto", "api/globalv1/api.proto"], {
  includeDirs: [root],
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: true,
});
const loaded = grpc.loadPackageDefinition(definition) as unknown as {
  localv1: { Sets: grpc.ServiceClientConstructor; Service: unknown; Endpoint: unknown };
  globalv1: { Sets: grpc.ServiceClientConstructor };
};

export interface RawOp {
  readonly op: "Reset" | "Sync" | "Set" | "Delete";
  readonly set?: string;
  readonly path?: string;
  readonly value?: Record<string, unknown>;
  readonly sync?: Record<string, unknown>;
}

// proto-loader has no decoder of its own for bytes fields; protobufjs (its dependency) has.
const protobuf = (await import("protobufjs")).default;
const pbRoot = new protobuf.Root();
pbRoot.resolvePath = (_origin, target) => `${root}${target}`;
pbRoot.loadSync(["api/localv1/api.proto", "api/globalv1/api.proto"], { keepCase: true });
const pbService = pbRoot.lookupType("localv1.Service");
const pbEndpoint = pbRoot.lookupType("localv1.Endpoint");

const valueTypes: Record<string, ReturnType<typeof pbRoot.lookupType>> = {
  ServicesSet: pbService,
  EndpointsSet: pbEndpoint,
  GlobalServiceInfos: pbRoot.lookupType("globalv1.ServiceInfo"),
  GlobalEndpointInfos: pbRoot.lookupType("globalv1.EndpointInfo"),
  GlobalNodeInfos: pbRoot.lookupType("globalv1.NodeInfo"),
};

/** Sets added after kpng's Go client: it skips the ops of a set it does not know. */
const GO_CLIENT_IGNORES = new Set(["ServiceCIDRsSet", "NodeInfoSet"]);

function decodeValue(set: string, bytes: Buffer): Record<string, unknown> {
  const type = valueTypes[set];
  if (type === undefined) throw new Error(`unexpected set ${set}`);
  return type.toObject(type.decode(bytes), { longs: Number, enums: String, defaults: false }) as Record<
    string,
    unknown
  >;
}

/** Opens a localv1 watch, reads `changeSets` change sets (one WatchReq each), then closes. */
export function kpngWatch(
  target: string,
  nodeName: string,
  changeSets: number,
  extra: Record<string, unknown> = {},
  onChangeSet: (received: number) => void = () => {},
): Promise<RawOp[][]> {
  return watchSets(
    new loaded.localv1.Sets(target, grpc.credentials.createInsecure()),
    changeSets,
    { NodeName: nodeName, ...extra },
    onChangeSet,
  );
}

/** Opens a globalv1 watch the way kpng's `api` source does (an empty GlobalWatchReq each time). */
export function kpngGlobalWatch(
  target: string,
  changeSets: number,
  onChangeSet: (received: number) => void = () => {},
): Promise<RawOp[][]> {
  return watchSets(
    new loaded.globalv1.Sets(target, grpc.credentials.createInsecure()),
    changeSets,
    {},
    onChangeSet,
  );
}

function watchSets(
  client: grpc.Client,
  changeSets: number,
  request: Record<string, unknown>,
  onChangeSet: (received: number) => void = () => {},
): Promise<RawOp[][]> {
  return new Promise((resolve, reject) => {
    const call = (
      client as unknown as { Watch(): grpc.ClientDuplexStream<unknown, Record<string, unknown>> }
    ).Watch();
    const result: RawOp[][] = [];
    let current: RawOp[] = [];
    call.on("data", (item: Record<string, unknown>) => {
      const op = item.Op as "Reset" | "Sync" | "Set" | "Delete";
      if (op === "Set") {
        const v = item.Set as { Ref: { Set: string; Path: string }; Bytes: Buffer };
        if (GO_CLIENT_IGNORES.has(v.Ref.Set)) return;
        current.push({ op, set: v.Ref.Set, path: v.Ref.Path, value: decodeValue(v.Ref.Set, v.Bytes) });
      } else if (op === "Delete") {
        const r = item.Delete as { Set: string; Path: string };
        if (GO_CLIENT_IGNORES.has(r.Set)) return;
        current.push({ op, set: r.Set, path: r.Path });
      } else if (op === "Sync") {
        current.push({ op, sync: item.Sync as Record<string, unknown> });
        result.push(current);
        current = [];
        onChangeSet(result.length);
        if (result.length === changeSets) {
          call.cancel();
          client.close();
          resolve(result);
          return;
        }
        call.write(request);
      } else {
        current.push({ op });
      }
    });
    call.on("error", (err: Error & { code?: number }) => {
      if (err.code !== grpc.status.CANCELLED) reject(err);
    });
    call.write(request);
  });
}
