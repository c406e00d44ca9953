// Which objects this proxy serves (kube-proxy's informer label selector, applied in the store so
// that a label added or removed later makes the object disappear or appear).

import {
  type EndpointSlice,
  type KubeObject,
  LABEL_HEADLESS,
  LABEL_SERVICE_PROXY_NAME,
} from "../model/kube.ts";

/**
 * Without a service proxy name, objects labelled for some other proxy (any value) are left to it;
 * with one, only objects carrying exactly that name are served.
 */
export function selectedByProxyName(
  labels: Readonly<Record<string, string>>,
  serviceProxyName: string,
): boolean {
  const label = labels[LABEL_SERVICE_PROXY_NAME];
  return serviceProxyName === "" ? label === undefined : label === serviceProxyName;
}

/** A label value (at most 63 characters, alphanumeric at both ends), or "" for the unlabelled Services. */
const PROXY_NAME = /^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** Whether a service proxy name can be a label's value, so that some Service can ask for it. */
export function isServiceProxyName(name: string): boolean {
  return PROXY_NAME.test(name);
}

/** Slices of headless services and slices that name no service are never read. */
function sliceIsUsable(slice: EndpointSlice): boolean {
  return slice.metadata.labels[LABEL_HEADLESS] === undefined && slice.serviceName !== "";
}

/**
 * The service proxy names a store serves: one or several (a process with one backend per name),
 * or "any" (kpng explain, which must see the Services left to other proxies too).
 */
export type ProxyNames = readonly string[] | "any";

function selectedByAnyOf(labels: Readonly<Record<string, string>>, names: ProxyNames): boolean {
  return names === "any" || names.some((name) => selectedByProxyName(labels, name));
}

export function isSelected(object: KubeObject, names: ProxyNames): boolean {
  switch (object.kind) {
    case "Node":
      return true;
    // kube-proxy reads ServiceCIDRs through the same label selector as Services.
    case "ServiceCIDR":
    case "Service":
      return selectedByAnyOf(object.metadata.labels, names);
    case "EndpointSlice":
      return selectedByAnyOf(object.metadata.labels, names) && sliceIsUsable(object);
  }
}
