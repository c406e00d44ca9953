import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { mergeEndpoints } from "../../../src/brain/endpoint-merge.ts";
import { ep, slice, terminating } from "./fixtures.ts";

const named = (name: string) => ({ name, namespace: "ns", service: "web" });

describe("mergeEndpoints: one endpoint per ip:port, in address order", () => {
  const rows = [
    {
      rule: "endpoints are sorted by address value, then port",
      slices: [slice([ep("10.0.0.10"), ep("10.0.0.9"), ep("10.0.0.2")])],
      want: ["10.0.0.2 n2", "10.0.0.9 n2", "10.0.0.10 n2"],
    },
    {
      rule: "the same ip:port in two slices: a non-terminating copy wins over a terminating one",
      slices: [
        slice([terminating("10.0.0.1", { node: "old" })], named("a")),
        slice([ep("10.0.0.1", { node: "new" })], named("b")),
      ],
      want: ["10.0.0.1 new"],
    },
    {
      rule: "a terminating copy seen later does not replace a non-terminating one",
      slices: [
        slice([ep("10.0.0.1", { node: "kept" })], named("a")),
        slice([terminating("10.0.0.1", { node: "late" })], named("b")),
      ],
      want: ["10.0.0.1 kept"],
    },
    {
      rule: "among non-terminating copies the last seen wins",
      slices: [
        slice([ep("10.0.0.1", { node: "first" })], named("a")),
        slice([ep("10.0.0.1", { node: "second" })], named("b")),
      ],
      want: ["10.0.0.1 second"],
    },
    {
      rule: "three copies: the last non-terminating one wins",
      slices: [
        slice([terminating("10.0.0.1", { node: "first" })], named("a")),
        slice([ep("10.0.0.1", { node: "second" })], named("b")),
        slice([ep("10.0.0.1", { node: "third" }), terminating("10.0.0.1", { node: "fourth" })], named("c")),
      ],
      want: ["10.0.0.1 third"],
    },
    {
      rule: "among terminating copies only, the first seen stays",
      slices: [
        slice([terminating("10.0.0.1", { node: "first" })], named("a")),
        slice([terminating("10.0.0.1", { node: "second" })], named("b")),
      ],
      want: ["10.0.0.1 first"],
    },
    {
      rule: "one address on two target ports (two slices) is two endpoints",
      slices: [
        slice([ep("10.0.0.1")], { ...named("a"), ports: [{ name: "http", protocol: "TCP", port: 9090 }] }),
        slice([ep("10.0.0.1")], named("b")),
      ],
      want: ["10.0.0.1 n2", "10.0.0.1 n2"],
      ports: [8080, 9090],
    },
  ];
  for (const row of rows) {
    it(row.rule, () => {
      const merged = mergeEndpoints(row.slices, "IPv4").get("http/TCP") ?? [];
      assert.deepEqual(
        merged.map((e) => `${e.ip} ${e.nodeName}`),
        row.want,
      );
      if (row.ports !== undefined)
        assert.deepEqual(
          merged.map((e) => e.port),
          row.ports,
        );
    });
  }
});
