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
function selectedByProxyName(labels: Readonly<Record<string, string>>, serviceProxyName: string): boolean {
  const label = labels[LABEL_SERVICE_PROXY_NAME];
  return serviceProxyName === "" ? label === undefined : label === serviceProxyName;
}

/** Slices of headless services and slices that name no service are never read. */
function sliceIsUsable(slice: EndpointSlice): boolean {
  return slice.metadata.labels[LABEL_HEADLESS] === undefined && slice.serviceName !== "";
}

export function isSelected(object: KubeObject, serviceProxyName: string): boolean {
  switch (object.kind) {
    case "Node":
      return true;
    // kube-proxy reads ServiceCIDRs through the same label selector as Services.
    case "ServiceCIDR":
    case "Service":
      return selectedByProxyName(object.metadata.labels, serviceProxyName);
    case "EndpointSlice":
      return selectedByProxyName(object.metadata.labels, serviceProxyName) && sliceIsUsable(object);
  }
}
