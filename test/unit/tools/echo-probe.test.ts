import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { isDocumentationAddress } from "../../../tools/netns/addresses.ts";
import { parseEchoReply, unmapAddress } from "../../../tools/netns/echo-reply.ts";
import { parseEchoServerArgs, startEchoServer } from "../../../tools/netns/echo-server.ts";
import { classifyError, probeAll } from "../../../tools/netns/probe.ts";

describe("classifyError", () => {
  const cases: [string | undefined, string][] = [
    ["ECONNREFUSED", "refused"],
    ["ETIMEDOUT", "timeout"],
    ["EHOSTUNREACH", "unreachable"],
    ["ENETUNREACH", "unreachable"],
    ["ECONNRESET", "reset"],
    ["EADDRINUSE", "other"],
    [undefined, "other"],
  ];
  for (const [code, want] of cases) test(`${code} is ${want}`, () => assert.equal(classifyError(code), want));
});

describe("echo replies", () => {
  test("a valid line parses; anything else is undefined", () => {
    const line =
      '{"name":"a","proto":"udp","client":{"address":"x","port":1},"server":{"address":"","port":2}}';
    assert.deepEqual(parseEchoReply(line)?.client, { address: "x", port: 1 });
    for (const bad of [
      "",
      "null",
      "[]",
      '{"name":"a"}',
      '{"name":"a","proto":"sctp","client":{},"server":{}}',
    ]) {
      assert.equal(parseEchoReply(bad), undefined, bad);
    }
  });

  test("IPv4-mapped IPv6 peers are shown as IPv4, real IPv6 stays", () => {
    assert.equal(unmapAddress("::ffff:198.51.100.2"), "198.51.100.2");
    assert.equal(unmapAddress("2001:db8::ffff:1"), "2001:db8::ffff:1");
  });

  test("the script's arguments: repeated ports, errors that say what is wrong", () => {
    assert.deepEqual(
      parseEchoServerArgs(["--name", "w", "--port", "80", "--port", "81", "--udp-port", "53"]),
      {
        name: "w",
        tcpPorts: [80, 81],
        udpPorts: [53],
      },
    );
    assert.throws(() => parseEchoServerArgs(["--port", "80"]), /--name is required/);
    assert.throws(() => parseEchoServerArgs(["--name", "w"]), /no port/);
    assert.throws(() => parseEchoServerArgs(["--name", "w", "--port", "70000"]), /bad port 70000/);
  });
});

describe("echo server and probes on loopback", () => {
  test("TCP and UDP get answers naming the server, over IPv4 and IPv6, in request order", async () => {
    const server = await startEchoServer({ name: "loop", tcpPorts: [0], udpPorts: [0] });
    try {
      const [tcp] = server.tcpPorts;
      const [udp] = server.udpPorts;
      const results = await probeAll({
        requests: [
          { proto: "tcp", host: "127.0.0.1", port: tcp! },
          { proto: "udp", host: "127.0.0.1", port: udp! },
          { proto: "tcp", host: "::1", port: tcp! },
          { proto: "udp", host: "::1", port: udp!, localPort: 0 },
        ],
      });
      assert.deepEqual(
        results.map((r) =>
          r.ok ? `${r.reply?.name} ${r.reply?.proto} ${r.reply?.client.address}` : r.failure,
        ),
        ["loop tcp 127.0.0.1", "loop udp 127.0.0.1", "loop tcp ::1", "loop udp ::1"],
      );
    } finally {
      await server.close();
    }
  });

  test("a closed port is refused, over TCP and UDP", async () => {
    const server = await startEchoServer({ name: "gone", tcpPorts: [0], udpPorts: [0] });
    await server.close();
    const results = await probeAll({
      requests: [
        { proto: "tcp", host: "127.0.0.1", port: server.tcpPorts[0]! },
        { proto: "udp", host: "127.0.0.1", port: server.udpPorts[0]! },
      ],
    });
    assert.deepEqual(
      results.map((r) => (r.ok ? r.answer : r.failure)),
      ["refused", "refused"],
    );
  });
});

describe("isDocumentationAddress", () => {
  const cases: [string, boolean][] = [
    ["192.0.2.1", true],
    ["198.51.100.255", true],
    ["203.0.113.7", true],
    ["2001:db8:1::8", true],
    ["10.0.0.1", false],
    ["192.0.3.1", false],
    ["2001:db9::1", false],
    ["not-an-ip", false],
  ];
  for (const [ip, want] of cases)
    test(`${ip} → ${want}`, () => assert.equal(isDocumentationAddress(ip), want));
});
