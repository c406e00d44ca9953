// Structural equality of computed LocalServices: how the tracker decides that nothing changed
// for this node, so it can keep the old object and the old revision.

import type { LocalEndpoint, LocalService, LocalServiceFamily, LocalServicePort } from "../model/local.ts";

function sameList<T>(a: readonly T[], b: readonly T[], same: (x: T, y: T) => boolean): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!same(a[i] as T, b[i] as T)) return false;
  return true;
}

const sameValue = <T>(x: T, y: T): boolean => x === y;

export function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  return sameList(a, b, sameValue);
}

function sameEndpoint(a: LocalEndpoint, b: LocalEndpoint): boolean {
  return (
    a.ip === b.ip &&
    a.port === b.port &&
    a.local === b.local &&
    a.nodeUnknown === b.nodeUnknown &&
    a.ready === b.ready &&
    a.serving === b.serving &&
    a.terminating === b.terminating
  );
}

function samePortFields(a: LocalServicePort, b: LocalServicePort): boolean {
  return (
    a.name === b.name &&
    a.protocol === b.protocol &&
    a.port === b.port &&
    a.nodePort === b.nodePort &&
    a.hasEndpoints === b.hasEndpoints &&
    sameList(a.endpointFamilies, b.endpointFamilies, sameValue)
  );
}

function samePort(a: LocalServicePort, b: LocalServicePort): boolean {
  return (
    samePortFields(a, b) &&
    sameList(a.internalEndpoints, b.internalEndpoints, sameEndpoint) &&
    sameList(a.externalEndpoints, b.externalEndpoints, sameEndpoint)
  );
}

function sameFamily(a: LocalServiceFamily, b: LocalServiceFamily): boolean {
  return (
    a.family === b.family &&
    a.clusterIP === b.clusterIP &&
    sameList(a.externalIPs, b.externalIPs, sameValue) &&
    sameList(a.loadBalancerIPs, b.loadBalancerIPs, sameValue) &&
    sameList(a.sourceRanges, b.sourceRanges, sameValue)
  );
}

function sameTopFields(a: LocalService, b: LocalService): boolean {
  return (
    a.namespace === b.namespace &&
    a.name === b.name &&
    a.type === b.type &&
    a.sessionAffinitySeconds === b.sessionAffinitySeconds &&
    a.internalTrafficPolicy === b.internalTrafficPolicy &&
    a.externalTrafficPolicy === b.externalTrafficPolicy &&
    a.healthCheckNodePort === b.healthCheckNodePort &&
    a.localReadyEndpoints === b.localReadyEndpoints &&
    sameList(a.families, b.families, sameFamily)
  );
}

export function sameLocalService(a: LocalService, b: LocalService): boolean {
  return a === b || (sameTopFields(a, b) && sameList(a.ports, b.ports, samePort));
}

/** Equal but for the ports' endpoint lists (which may differ). */
export function sameServiceFields(a: LocalService, b: LocalService): boolean {
  return a === b || (sameTopFields(a, b) && sameList(a.ports, b.ports, samePortFields));
}
