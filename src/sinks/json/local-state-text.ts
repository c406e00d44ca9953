// The text of a local state's JSON document (docs/local-state.md), written piece by piece: the
// same characters as `JSON.stringify(localStateToJson(state), null, 2)` and a newline, without
// building the document's objects first or holding it as one string. At 100k Services the
// document is 160 MB: built whole, it cost more than computing the state.

import type { LocalEndpoint, LocalService, LocalServicePort, LocalState } from "../../model/local.ts";
import { endpointString } from "../../model/local.ts";
import { sortedServices } from "./local-state-json.ts";

/** Services per piece: about 1 MB of text for services of two ports and ten endpoints. */
const SERVICES_PER_PIECE = 1000;

const q = JSON.stringify;

/** The document in pieces to be written in order; it ends with a newline. */
export function* localStateText(state: LocalState): Generator<string> {
  const services = sortedServices(state);
  let head = `{\n  "node": ${q(state.node)},\n  "revision": ${state.revision},\n  "serviceCIDRs": ${stringList(state.serviceCIDRs, "  ")},\n  "services": `;
  if (services.length === 0) {
    yield `${head}[]\n}\n`;
    return;
  }
  head += "[\n";
  for (let from = 0; from < services.length; from += SERVICES_PER_PIECE) {
    const to = Math.min(services.length, from + SERVICES_PER_PIECE);
    let piece = from === 0 ? head : "";
    for (let i = from; i < to; i++) {
      piece += serviceText(services[i] as LocalService);
      piece += i + 1 < services.length ? ",\n" : "\n  ]\n}\n";
    }
    yield piece;
  }
}

/** A list of strings at the indent of its key: "[]" or one item per line. */
function stringList(items: readonly string[], indent: string): string {
  if (items.length === 0) return "[]";
  let out = "[";
  for (let i = 0; i < items.length; i++) out += `${i === 0 ? "\n" : ",\n"}${indent}  ${q(items[i])}`;
  return `${out}\n${indent}]`;
}

function endpointList(items: readonly LocalEndpoint[], indent: string): string {
  if (items.length === 0) return "[]";
  let out = "[";
  for (let i = 0; i < items.length; i++)
    out += `${i === 0 ? "\n" : ",\n"}${indent}  ${q(endpointString(items[i] as LocalEndpoint))}`;
  return `${out}\n${indent}]`;
}

function serviceText(s: LocalService): string {
  // Key order and indents as localStateToJson and JSON.stringify(…, null, 2) give them.
  const i = "      ";
  let ports = "[]";
  if (s.ports.length > 0) {
    ports = "[";
    for (let p = 0; p < s.ports.length; p++)
      ports += `${p === 0 ? "\n" : ",\n"}${portText(s.ports[p] as LocalServicePort)}`;
    ports += "\n      ]";
  }
  return `    {
${i}"namespace": ${q(s.namespace)},
${i}"name": ${q(s.name)},
${i}"type": ${q(s.type)},
${i}"clusterIPs": ${stringList(s.clusterIPs, i)},
${i}"externalIPs": ${stringList(s.externalIPs, i)},
${i}"loadBalancerIPs": ${stringList(s.loadBalancerIPs, i)},
${i}"sourceRanges": ${stringList(s.sourceRanges, i)},
${i}"sessionAffinitySeconds": ${q(s.sessionAffinitySeconds)},
${i}"internalTrafficPolicy": ${q(s.internalTrafficPolicy)},
${i}"externalTrafficPolicy": ${q(s.externalTrafficPolicy)},
${i}"healthCheckNodePort": ${q(s.healthCheckNodePort)},
${i}"localReadyEndpoints": ${q(s.localReadyEndpoints)},
${i}"ports": ${ports}
    }`;
}

function portText(p: LocalServicePort): string {
  const i = "          ";
  return `        {
${i}"name": ${q(p.name)},
${i}"protocol": ${q(p.protocol)},
${i}"port": ${q(p.port)},
${i}"nodePort": ${q(p.nodePort)},
${i}"hasEndpoints": ${q(p.hasEndpoints)},
${i}"endpointFamilies": ${stringList(p.endpointFamilies, i)},
${i}"internalEndpoints": ${endpointList(p.internalEndpoints, i)},
${i}"externalEndpoints": ${endpointList(p.externalEndpoints, i)}
        }`;
}
