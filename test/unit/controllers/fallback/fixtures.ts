// Pods for the fallback controller's tests: a row states only what it is about.

import type { ContainerPort, Pod } from "../../../../src/controllers/fallback/pod.ts";

export interface PodInput {
  readonly ips?: readonly string[];
  readonly node?: string;
  readonly ready?: boolean;
  readonly terminating?: boolean;
  readonly finished?: boolean;
  readonly ports?: readonly ContainerPort[];
  readonly labels?: Record<string, string>;
}

/** A ready pod "ns/<name>" on node n1 with a container port "http" TCP 8080. */
export function pod(name: string, ip: string, input: PodInput = {}): Pod {
  return {
    kind: "Pod",
    metadata: {
      namespace: "ns",
      name,
      uid: `uid-${name}`,
      resourceVersion: "1",
      labels: input.labels ?? { app: "sorry" },
      annotations: {},
    },
    nodeName: input.node ?? "n1",
    ips: input.ips ?? [ip],
    ready: input.ready ?? true,
    terminating: input.terminating ?? false,
    finished: input.finished ?? false,
    ports: input.ports ?? [{ name: "http", containerPort: 8080, protocol: "TCP" }],
  };
}
