// Service ports → the port numbers one pod serves them on, as the EndpointSlice controller
// resolves targetPort.

import type { Protocol, ServicePort } from "../../model/kube.ts";
import type { ContainerPort } from "./pod.ts";

export interface ResolvedPort {
  readonly name: string;
  readonly protocol: Protocol;
  readonly port: number;
}

/**
 * - a numeric targetPort is used as is; unset ("") means the Service port's own number;
 * - a named targetPort is the pod's container port of that name and the Service port's
 *   protocol; a pod without one does not serve that Service port (it is left out, not guessed).
 */
export function resolvePorts(
  servicePorts: readonly ServicePort[],
  podPorts: readonly ContainerPort[],
): ResolvedPort[] {
  const out: ResolvedPort[] = [];
  for (const sp of servicePorts) {
    let port: number | undefined;
    if (typeof sp.targetPort === "number") port = sp.targetPort;
    else if (sp.targetPort === "") port = sp.port;
    else {
      port = podPorts.find((cp) => cp.name === sp.targetPort && cp.protocol === sp.protocol)?.containerPort;
    }
    if (port !== undefined && port > 0) out.push({ name: sp.name, protocol: sp.protocol, port });
  }
  return out;
}

/** Pods whose ports resolve alike share slices; this is their group's key. */
export function portsKey(ports: readonly ResolvedPort[]): string {
  return ports.map((p) => `${p.name}/${p.protocol}/${p.port}`).join(",");
}
