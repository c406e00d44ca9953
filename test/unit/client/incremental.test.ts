import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type IncrementalHandlers, incrementalSink } from "../../../src/client/incremental.ts";
import type { LocalService, LocalState, LocalStateFeed } from "../../../src/model/local.ts";
import { settle } from "../../support/settle.ts";
import { endpoint, localState, service, servicePort } from "../api/fixtures.ts";

/** A feed the test drives by hand; deliver() resolves once the sink has handled the state. */
function manualFeed(): { feed: LocalStateFeed; deliver(state: LocalState): Promise<void> } {
  let listener: ((s: LocalState) => void | Promise<void>) | undefined;
  return {
    feed: {
      subscribe(l) {
        listener = l;
        return () => {
          listener = undefined;
        };
      },
    },
    deliver: async (state) => {
      await listener?.(state);
    },
  };
}

function recorder(): { handlers: IncrementalHandlers; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    handlers: {
      setService: (s) => void calls.push(`setService ${s.namespace}/${s.name}`),
      deleteService: (ns, name) => void calls.push(`deleteService ${ns}/${name}`),
      setEndpoint: (ns, svc, key, ep) => void calls.push(`setEndpoint ${ns}/${svc}/${key} ${ep.port}`),
      deleteEndpoint: (ns, svc, key) => void calls.push(`deleteEndpoint ${ns}/${svc}/${key}`),
      sync: (state) => void calls.push(`sync ${state.revision}`),
    },
  };
}

const withEndpoints = (name: string, ...ips: string[]): LocalService =>
  service(name, {
    ports: [servicePort({ internalEndpoints: ips.map((ip) => endpoint(ip, 8080)) })],
  });

describe("incremental sink", () => {
  const a = withEndpoints("a", "192.0.2.1", "192.0.2.2");
  const b = withEndpoints("b", "192.0.2.3");
  const steps: {
    name: string;
    services: LocalService[];
    expected: string[];
  }[] = [
    {
      name: "the first state sets every service, then every endpoint, then syncs",
      services: [a, b],
      expected: [
        "setService default/a",
        "setService default/b",
        "setEndpoint default/a/192.0.2.1 8080",
        "setEndpoint default/a/192.0.2.2 8080",
        "setEndpoint default/b/192.0.2.3 8080",
        "sync 1",
      ],
    },
    {
      name: "the same objects again give only a sync",
      services: [a, b],
      expected: ["sync 2"],
    },
    {
      name: "an equal but new service object re-sets the service and no unchanged endpoint",
      services: [withEndpoints("a", "192.0.2.1", "192.0.2.2"), b],
      expected: ["setService default/a", "sync 3"],
    },
    {
      name: "an endpoint replaced: the old one deleted before the new one is set",
      services: [withEndpoints("a", "192.0.2.1", "192.0.2.9"), b],
      expected: [
        "setService default/a",
        "deleteEndpoint default/a/192.0.2.2",
        "setEndpoint default/a/192.0.2.9 8080",
        "sync 4",
      ],
    },
    {
      name: "a target port change re-sets that endpoint",
      services: [
        service("a", {
          ports: [
            servicePort({
              internalEndpoints: [endpoint("192.0.2.1", 9090), endpoint("192.0.2.9", 8080)],
            }),
          ],
        }),
        b,
      ],
      expected: ["setService default/a", "setEndpoint default/a/192.0.2.1 9090", "sync 5"],
    },
    {
      name: "a service gone: its endpoints deleted, then the service, last",
      services: [b],
      expected: [
        "deleteEndpoint default/a/192.0.2.1",
        "deleteEndpoint default/a/192.0.2.9",
        "deleteService default/a",
        "sync 6",
      ],
    },
    {
      name: "an empty state deletes everything and still syncs",
      services: [],
      expected: ["deleteEndpoint default/b/192.0.2.3", "deleteService default/b", "sync 7"],
    },
  ];

  test("each step reports exactly the difference from the previous one", async () => {
    const { feed, deliver } = manualFeed();
    const { handlers, calls } = recorder();
    incrementalSink(feed, handlers);
    let revision = 0;
    for (const step of steps) {
      calls.length = 0;
      await deliver(localState("n1", ++revision, step.services));
      assert.deepEqual(calls, step.expected, step.name);
    }
  });

  test("the handlers are awaited in order, one at a time", async () => {
    const { feed, deliver } = manualFeed();
    const events: string[] = [];
    let running = 0;
    const slow = (name: string) => async () => {
      running++;
      assert.equal(running, 1, "handlers never overlap");
      await settle(1);
      events.push(name);
      running--;
    };
    incrementalSink(feed, {
      setService: slow("setService"),
      deleteService: slow("deleteService"),
      setEndpoint: slow("setEndpoint"),
      deleteEndpoint: slow("deleteEndpoint"),
      sync: slow("sync"),
    });
    await deliver(localState("n1", 1, [b]));
    assert.deepEqual(events, ["setService", "setEndpoint", "sync"]);
  });

  test("unsubscribing stops deliveries", async () => {
    const { feed, deliver } = manualFeed();
    const { handlers, calls } = recorder();
    const stop = incrementalSink(feed, handlers);
    stop();
    await deliver(localState("n1", 1, [a]));
    assert.deepEqual(calls, []);
  });
});
