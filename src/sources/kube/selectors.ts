// Which objects the kube source asks the API server for. A proxy named with --service-proxy-name
// serves only Services labelled with that name; the default proxy serves only unlabelled ones.
// EndpointSlices of headless Services are never needed.

import { LABEL_HEADLESS, LABEL_SERVICE_PROXY_NAME } from "../../model/kube.ts";

/**
 * The proxy name of a process serving several (one backend each) and of `kpng explain`: every
 * Service is read, whatever proxy it names, and the brain's store selects. Not a valid label value.
 */
export const EVERY_PROXY_NAME = "*";

export function serviceLabelSelector(serviceProxyName: string | undefined): string | undefined {
  if (serviceProxyName === EVERY_PROXY_NAME) return undefined;
  return serviceProxyName
    ? `${LABEL_SERVICE_PROXY_NAME}=${serviceProxyName}`
    : `!${LABEL_SERVICE_PROXY_NAME}`;
}

export function endpointSliceLabelSelector(serviceProxyName: string | undefined): string {
  const byName = serviceLabelSelector(serviceProxyName);
  return byName === undefined ? `!${LABEL_HEADLESS}` : `${byName},!${LABEL_HEADLESS}`;
}

/** Only this node's Node object, unless every node is wanted (a brain serving many nodes). */
export function nodeFieldSelector(nodeName: string | undefined): string | undefined {
  return nodeName === undefined ? undefined : `metadata.name=${nodeName}`;
}
