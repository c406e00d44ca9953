// core/v1 Pod: raw JSON → the fields a fallback EndpointSlice is built from.

import {
  InvalidField,
  integer,
  object,
  oneOf,
  optionalArray,
  optionalObject,
  optionalString,
  type RawObject,
} from "../../model/field-reader.ts";
import { familyOfAddress } from "../../model/ip.ts";
import type { ObjectMeta, Protocol } from "../../model/kube.ts";
import type { ParseResult } from "../../model/validate.ts";
import { bestEffortName, checkKind, readMetadata } from "../../model/validate-meta.ts";
import { Interner } from "./interner.ts";

const NO_ANNOTATIONS = Object.freeze({});
const strings = new Interner();

export interface ContainerPort {
  readonly name: string;
  readonly containerPort: number;
  readonly protocol: Protocol;
}

export interface Pod {
  readonly kind: "Pod";
  readonly metadata: ObjectMeta;
  readonly nodeName: string;
  /** status.podIPs (or status.podIP), validated; empty until the pod has an address. */
  readonly ips: readonly string[];
  /** The Ready condition is True. */
  readonly ready: boolean;
  /** metadata.deletionTimestamp is set. */
  readonly terminating: boolean;
  /** Succeeded and Failed pods never serve again. */
  readonly finished: boolean;
  /** The container ports of every container, in spec order. */
  readonly ports: readonly ContainerPort[];
}

function readIP(value: unknown, path: string): string {
  const ip = optionalString(value, path);
  if (familyOfAddress(ip) === undefined)
    throw new InvalidField(`${path}: ${JSON.stringify(ip)} is not an IP`);
  return ip;
}

function readIPs(status: RawObject): string[] {
  const list = optionalArray(status.podIPs, "status.podIPs").map((raw, i) =>
    readIP(object(raw, `status.podIPs[${i}]`).ip, `status.podIPs[${i}].ip`),
  );
  if (list.length > 0) return list;
  const single = optionalString(status.podIP, "status.podIP");
  return single === "" ? [] : [readIP(single, "status.podIP")];
}

/**
 * Ports of the containers, then of the sidecars (init containers with restartPolicy Always, which
 * run beside them): the EndpointSlice controller resolves named targetPorts over both.
 */
function readPorts(spec: RawObject): ContainerPort[] {
  const out: ContainerPort[] = [];
  const containers = optionalArray(spec.containers, "spec.containers").map((raw, c) => ({
    raw,
    path: `spec.containers[${c}]`,
  }));
  optionalArray(spec.initContainers, "spec.initContainers").forEach((raw, c) => {
    const path = `spec.initContainers[${c}]`;
    if (object(raw, path).restartPolicy === "Always") containers.push({ raw, path });
  });
  for (const { raw: rawContainer, path: containerPath } of containers) {
    const container = object(rawContainer, containerPath);
    optionalArray(container.ports, `${containerPath}.ports`).forEach((rawPort, p) => {
      const path = `${containerPath}.ports[${p}]`;
      const port = object(rawPort, path);
      out.push({
        name: strings.intern(optionalString(port.name, `${path}.name`)),
        containerPort: integer(port.containerPort, `${path}.containerPort`, 1, 65535),
        protocol:
          port.protocol === undefined
            ? "TCP"
            : oneOf(port.protocol, `${path}.protocol`, ["TCP", "UDP", "SCTP"]),
      });
    });
  }
  return out;
}

function readReady(status: RawObject): boolean {
  return optionalArray(status.conditions, "status.conditions").some((raw) => {
    const condition = optionalObject(raw, "status.conditions[]");
    return condition.type === "Ready" && condition.status === "True";
  });
}

export function parsePod(raw: unknown): ParseResult<Pod> {
  try {
    const r = object(raw, "object");
    checkKind(r, "Pod", ["v1"]);
    const metadata = readMetadata(r, true, "default");
    const spec = optionalObject(r.spec, "spec");
    const status = optionalObject(r.status, "status");
    const phase = optionalString(status.phase, "status.phase");
    return {
      ok: true,
      value: {
        kind: "Pod",
        // Only what a slice is built from is kept: annotations (often kilobytes per pod) are not.
        metadata: {
          namespace: strings.intern(metadata.namespace),
          name: metadata.name,
          uid: metadata.uid,
          resourceVersion: metadata.resourceVersion,
          labels: strings.labels(metadata.labels),
          annotations: NO_ANNOTATIONS,
        },
        nodeName: strings.intern(optionalString(spec.nodeName, "spec.nodeName")),
        ips: readIPs(status),
        ready: readReady(status),
        terminating: optionalObject(r.metadata, "metadata").deletionTimestamp != null,
        finished: phase === "Succeeded" || phase === "Failed",
        ports: readPorts(spec),
      },
    };
  } catch (err) {
    if (!(err instanceof InvalidField)) throw err;
    return { ok: false, kind: "Pod", name: bestEffortName(raw, true, "default"), reason: err.message };
  }
}
