// The Service IP ranges through the store and the tracker: read from ServiceCIDR objects, or
// fixed by --service-cidrs; merged; a revision only when they change.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setImmediate as nextMacrotask } from "node:timers/promises";
import { LocalStateTracker } from "../../../src/brain/local-state-tracker.ts";
import { ClusterStore, type ClusterStoreOptions } from "../../../src/brain/store.ts";
import type { ServiceCIDR } from "../../../src/model/kube.ts";
import type { LocalState } from "../../../src/model/local.ts";
import { node, svc } from "./fixtures.ts";

function serviceCIDR(name: string, cidrs: string[], labels: Record<string, string> = {}): ServiceCIDR {
  return {
    kind: "ServiceCIDR",
    metadata: { namespace: "", name, uid: "", resourceVersion: "", labels, annotations: {} },
    cidrs,
  };
}

async function tracked(
  objects: readonly (ServiceCIDR | ReturnType<typeof svc>)[],
  options: ClusterStoreOptions = {},
) {
  const store = new ClusterStore(options);
  store.upsert(node("n1"));
  for (const o of objects) store.upsert(o);
  const tracker = new LocalStateTracker(store, "n1");
  store.subscribe((c) => tracker.update(c));
  store.synced();
  await nextMacrotask();
  const apply = async (edit: (s: ClusterStore) => void): Promise<LocalState> => {
    edit(store);
    await nextMacrotask();
    return tracker.state;
  };
  return { store, tracker, apply };
}

describe("Service IP ranges in the local state", () => {
  test("the first state carries the ranges of every ServiceCIDR, merged", async () => {
    const { tracker } = await tracked([
      serviceCIDR("kubernetes", ["198.51.100.0/24", "2001:db8:1::/112"]),
      serviceCIDR("inside", ["198.51.100.0/25"]),
      serviceCIDR("more", ["203.0.113.0/24"]),
    ]);
    assert.equal(tracker.state.revision, 1);
    // Split per family by the brain: each family's rules take their own list as it is.
    assert.deepEqual(tracker.state.serviceCIDRs, {
      IPv4: ["198.51.100.0/24", "203.0.113.0/24"],
      IPv6: ["2001:db8:1::/112"],
    });
  });

  test("no ServiceCIDR: no ranges", async () => {
    const { tracker } = await tracked([svc()]);
    assert.deepEqual(tracker.state.serviceCIDRs, { IPv4: [], IPv6: [] });
  });

  const rows: {
    name: string;
    edit: (s: ClusterStore) => void;
    bump: number;
    want: { IPv4: string[]; IPv6: string[] };
  }[] = [
    {
      name: "a new range bumps the revision",
      edit: (s) => s.upsert(serviceCIDR("more", ["203.0.113.0/24"])),
      bump: 1,
      want: { IPv4: ["198.51.100.0/24", "203.0.113.0/24"], IPv6: [] },
    },
    {
      name: "an IPv6 range goes to the IPv6 list alone",
      edit: (s) => s.upsert(serviceCIDR("v6", ["2001:db8:1::/112"])),
      bump: 1,
      want: { IPv4: ["198.51.100.0/24"], IPv6: ["2001:db8:1::/112"] },
    },
    {
      name: "a dual-stack ServiceCIDR gives each family its range",
      edit: (s) => s.upsert(serviceCIDR("kubernetes", ["198.51.100.0/24", "2001:db8:2::/112"])),
      bump: 1,
      want: { IPv4: ["198.51.100.0/24"], IPv6: ["2001:db8:2::/112"] },
    },
    {
      name: "removing the last range bumps it and empties the list",
      edit: (s) => s.delete("ServiceCIDR", "kubernetes"),
      bump: 1,
      want: { IPv4: [], IPv6: [] },
    },
    {
      name: "a range inside a known one changes nothing",
      edit: (s) => s.upsert(serviceCIDR("inside", ["198.51.100.128/25"])),
      bump: 0,
      want: { IPv4: ["198.51.100.0/24"], IPv6: [] },
    },
    {
      name: "a relist with the same objects changes nothing",
      edit: (s) => s.replace("ServiceCIDR", [serviceCIDR("kubernetes", ["198.51.100.0/24"])]),
      bump: 0,
      want: { IPv4: ["198.51.100.0/24"], IPv6: [] },
    },
    {
      name: "a range labelled for another proxy is not ours",
      edit: (s) =>
        s.upsert(
          serviceCIDR("theirs", ["203.0.113.0/24"], { "service.kubernetes.io/service-proxy-name": "x" }),
        ),
      bump: 0,
      want: { IPv4: ["198.51.100.0/24"], IPv6: [] },
    },
  ];
  for (const row of rows) {
    test(row.name, async () => {
      const { tracker, apply } = await tracked([svc(), serviceCIDR("kubernetes", ["198.51.100.0/24"])]);
      const before = tracker.state;
      const after = await apply(row.edit);
      assert.equal(after.revision, before.revision + row.bump);
      assert.deepEqual(after.serviceCIDRs, row.want);
      // Services are untouched by a change of ranges: the same objects.
      for (const [key, value] of before.services) assert.equal(after.services.get(key), value);
      if (row.bump === 0) assert.equal(after, before);
    });
  }

  test("fixed ranges (--service-cidrs) replace ServiceCIDR objects, which are then ignored", async () => {
    const { tracker, apply } = await tracked([serviceCIDR("kubernetes", ["198.51.100.0/24"])], {
      serviceCIDRs: ["2001:db8:1::/112", "203.0.113.0/24"],
    });
    assert.deepEqual(tracker.state.serviceCIDRs, { IPv4: ["203.0.113.0/24"], IPv6: ["2001:db8:1::/112"] });
    const before = tracker.state;
    const after = await apply((s) => s.upsert(serviceCIDR("more", ["192.0.2.0/24"])));
    assert.equal(after, before);
  });
});
