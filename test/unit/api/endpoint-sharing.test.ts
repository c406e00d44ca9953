// Endpoint values are encoded once for every node that sees them alike: the descriptor tells
// apart exactly the values that encode differently, a node's own LocalService reuses the other
// nodes' frames for every endpoint it sees as they do, and whatever is reused, the bytes are the
// generated encoder's.

import assert from "node:assert/strict";
import { test } from "node:test";
import { concatFrames, opItemsOf, setFrame } from "../../../src/api/frames.ts";
import {
  Endpoint as EndpointCodec,
  OpItem,
  Service as ServiceCodec,
  Set as WireSet,
} from "../../../src/api/gen/api/localv1/api.ts";
import {
  encodeLocalService,
  endpointDescriptor,
  endpointValueOf,
  type GatheredEndpoint,
} from "../../../src/api/local-codec.ts";
import { encodedService } from "../../../src/api/local-diff.ts";
import type { LocalEndpoint, LocalService } from "../../../src/model/local.ts";
import { seeded } from "../../support/seeded.ts";
import { endpoint, service, servicePort } from "./fixtures.ts";

const sample = (): GatheredEndpoint => ({
  first: { ip: "192.0.2.1", port: 8080, local: false, ready: true, serving: true, terminating: false },
  scopes: [
    { Name: "http", Port: 8080, Internal: true, External: false },
    { Name: "", Port: 9090, Internal: false, External: true },
  ],
});

/** Every input of an endpoint's value but its IP, each changed in turn. */
function variants(): [string, GatheredEndpoint][] {
  const out: [string, GatheredEndpoint][] = [];
  for (const flag of ["local", "ready", "serving", "terminating"] as const) {
    const v = sample();
    out.push([flag, { ...v, first: { ...v.first, [flag]: !v.first[flag] } }]);
  }
  for (let i = 0; i < 2; i++) {
    for (const field of ["Name", "Port", "Internal", "External"] as const) {
      const v = sample();
      const scope = v.scopes[i]!;
      const changed =
        typeof scope[field] === "string"
          ? `${scope[field]}x`
          : typeof scope[field] === "number"
            ? (scope[field] as number) + 1
            : !scope[field];
      v.scopes[i] = { ...scope, [field]: changed };
      out.push([`scope ${i} ${field}`, v]);
    }
  }
  const fewer = sample();
  fewer.scopes.pop();
  out.push(["one scope less", fewer]);
  const swapped = sample();
  swapped.scopes.reverse();
  out.push(["scopes in the other order", swapped]);
  // Not on the wire: the descriptor ignores them as the encoding does.
  const v = sample();
  out.push(["another target port on the first", { ...v, first: { ...v.first, port: 1 } }]);
  out.push(["node unknown", { ...v, first: { ...v.first, nodeUnknown: true } }]);
  return out;
}

test("endpointDescriptor differs exactly when the encoding does, for every input", () => {
  const base = sample();
  const bytes = (g: GatheredEndpoint) =>
    Buffer.from(EndpointCodec.encode(endpointValueOf("192.0.2.1", g)).finish());
  for (const [name, other] of variants()) {
    assert.equal(
      endpointDescriptor(other) === endpointDescriptor(base),
      bytes(other).equals(bytes(base)),
      name,
    );
  }
  assert.equal(endpointDescriptor(structuredClone(base)), endpointDescriptor(base));
});

/** Services of a few names, as the nodes of several zones would compute them: mostly alike. */
function randomService(random: () => number): LocalService {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  const ips = ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.10", "2001:db8::1", "2001:db8::2"];
  const portSpecs = pick([
    [{ name: "http", target: 8080 }],
    [{ name: "", target: 8080 }],
    [
      { name: "http", target: 8080 },
      { name: "dns", target: 53 },
    ],
  ]);
  const local = random() < 0.5 ? pick(ips) : undefined;
  const epOf = (ip: string, target: number): LocalEndpoint =>
    endpoint(ip, random() < 0.1 ? target + 1 : target, {
      local: ip === local,
      ready: random() < 0.9,
      terminating: random() < 0.1,
    });
  const chosen = ips.filter(() => random() < 0.8);
  const ports = portSpecs.map(({ name, target }) => {
    const internal = chosen.filter(() => random() < 0.9).map((ip) => epOf(ip, target));
    const external = random() < 0.3 ? internal.filter((ep) => ep.local) : internal;
    return servicePort({ name, internalEndpoints: internal, externalEndpoints: external });
  });
  return service(pick(["web", "api", "db"]), {
    ports,
    localReadyEndpoints: local === undefined ? 0 : pick([0, 1]),
    ...(random() < 0.2 ? { type: "NodePort" as const } : {}),
  });
}

/** The bytes the generated encoder gives a service: its Service value and every endpoint's Set. */
function assertGeneratedBytes(svc: LocalService, label: string): void {
  const key = `${svc.namespace}/${svc.name}`;
  const encoded = encodedService(svc);
  const wire = encodeLocalService(svc);
  const serviceBytes = ServiceCodec.encode(wire.service).finish();
  assert.deepEqual(Buffer.from(encoded.service.bytes), Buffer.from(serviceBytes), `service ${label}`);
  const ips = [...wire.endpoints.keys()].sort();
  assert.deepEqual(
    [...encoded.endpoints.keys()],
    ips.map((ip) => `${key}/${ip}`),
    `endpoint paths ${label}`,
  );
  const frames = ips.map((ip) => {
    const bytes = EndpointCodec.encode(wire.endpoints.get(ip)!).finish();
    const value = encoded.endpoints.get(`${key}/${ip}`)!;
    assert.deepEqual(Buffer.from(value.bytes), Buffer.from(bytes), `endpoint ${ip} of ${label}`);
    return setFrame(WireSet.EndpointsSet, `${key}/${ip}`, bytes);
  });
  assert.deepEqual(encoded.endpointSets, concatFrames(frames), `endpoint sets ${label}`);
}

test("every service encodes to the generated encoder's bytes, whatever it reuses", () => {
  const random = seeded(24);
  for (let n = 0; n < 2000; n++) {
    const svc = randomService(random);
    assertGeneratedBytes(svc, `${n}`);
  }
});

test("services laid out nearly alike (each node's own) encode to the generated bytes", () => {
  // One layout per name: the same IPs and target ports in the same places of every port's
  // lists, an IP in several ports and in both lists. From one to the next, flags differ, each
  // place on its own (an IP's first place decides its value), as nodes compute them; an
  // external list may hold other endpoints (external traffic policy Local), an internal list
  // one less (internal traffic policy Local, where the IPs then differ).
  const random = seeded(2104);
  const layouts = {
    web: [
      { name: "http", internal: ["192.0.2.1", "192.0.2.2", "192.0.2.3"], external: ["192.0.2.2"] },
      { name: "metrics", internal: ["192.0.2.3", "192.0.2.1"], external: [] },
    ],
    dns: [{ name: "", internal: ["192.0.2.5", "2001:db8::5"], external: ["192.0.2.5", "2001:db8::5"] }],
  };
  for (let n = 0; n < 2000; n++) {
    const name = random() < 0.5 ? "web" : "dns";
    const flip = random() < 0.3;
    const epOf = (ip: string): LocalEndpoint =>
      endpoint(ip, 8080, {
        local: flip && random() < 0.3,
        ready: !flip || random() < 0.8,
        serving: !flip || random() < 0.8,
        terminating: flip && random() < 0.2,
      });
    const ports = layouts[name].map((l) =>
      servicePort({
        name: l.name,
        internalEndpoints: (flip && random() < 0.1 ? l.internal.slice(1) : l.internal).map(epOf),
        externalEndpoints: (flip && random() < 0.3
          ? l.internal.filter(() => random() < 0.4)
          : l.external
        ).map(epOf),
      }),
    );
    const svc = service(name, { ports, localReadyEndpoints: flip ? 1 : 0 });
    assertGeneratedBytes(svc, `${n}`);
    // An equal service after it takes its buffer as it is.
    const again = service(name, { ports, localReadyEndpoints: flip ? 1 : 0 });
    assert.equal(encodedService(again).endpointSets, encodedService(svc).endpointSets, `reused ${n}`);
  }
});

test("a node's own LocalService shares the frames of the endpoints it sees like other nodes", () => {
  const ips = ["192.0.2.1", "192.0.2.2", "192.0.2.3"];
  const elsewhere = service("web", {
    ports: [servicePort({ internalEndpoints: ips.map((ip) => endpoint(ip, 8080)) })],
  });
  const onNode = service("web", {
    ports: [
      servicePort({
        internalEndpoints: ips.map((ip, i) => endpoint(ip, 8080, { local: i === 1 })),
      }),
    ],
  });
  const a = encodedService(elsewhere);
  const b = encodedService(onNode);
  const path = (i: number) => `default/web/${ips[i]}`;
  assert.equal(a.endpoints.get(path(0))!.frame, b.endpoints.get(path(0))!.frame, "shared");
  assert.equal(a.endpoints.get(path(2))!.frame, b.endpoints.get(path(2))!.frame, "shared");
  assert.notEqual(a.endpoints.get(path(1))!.frame, b.endpoints.get(path(1))!.frame, "its own");
  // The full state's buffer holds every endpoint's Set, in path order, with the right value.
  const items = opItemsOf(b.endpointSets).map((item) => OpItem.decode(item).Op);
  assert.deepEqual(
    items.map((op) =>
      op?.$case === "Set" ? [op.value.Ref?.Path, EndpointCodec.decode(op.value.Bytes).Local] : [],
    ),
    [
      [path(0), false],
      [path(1), true],
      [path(2), false],
    ],
  );
});
