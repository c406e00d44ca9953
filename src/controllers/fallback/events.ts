// core/v1 Events on a Service, so `kubectl describe service` shows what the controller did.

import { randomBytes } from "node:crypto";
import type { KubeRequester } from "../../kube/request.ts";
import type { Service } from "../../model/kube.ts";

const COMPONENT = "fallback-controller";

export type EventReason = "FallbackActivated" | "FallbackDeactivated" | "InvalidFallback";

export function serviceEvent(
  service: Service,
  type: "Normal" | "Warning",
  reason: EventReason,
  message: string,
  now: Date,
): unknown {
  const { namespace, name, uid } = service.metadata;
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name: `${name}.${randomBytes(8).toString("hex")}`, namespace },
    involvedObject: { apiVersion: "v1", kind: "Service", namespace, name, uid },
    type,
    reason,
    message,
    count: 1,
    firstTimestamp: now.toISOString(),
    lastTimestamp: now.toISOString(),
    source: { component: COMPONENT },
    reportingComponent: COMPONENT,
  };
}

export async function recordEvent(
  requester: KubeRequester,
  event: unknown,
  namespace: string,
  signal?: AbortSignal,
): Promise<void> {
  await requester.send({
    method: "POST",
    path: `/api/v1/namespaces/${namespace}/events`,
    body: event,
    ...(signal && { signal }),
  });
}
