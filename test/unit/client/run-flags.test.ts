import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseRunFlags, UsageError } from "../../../src/client/run.ts";

const argv = (...flags: string[]) => ["node", "backend.ts", ...flags];

describe("run() flags", () => {
  test("defaults: the local brain's socket, no TLS, not once", () => {
    const flags = parseRunFlags(argv("--node-name", "n1"));
    assert.deepEqual(flags, {
      api: "unix:///run/kpng/proxy.sock",
      nodeName: "n1",
      once: false,
      tls: { cert: undefined, key: undefined, ca: undefined },
    });
  });

  test("every standard flag is read", () => {
    const flags = parseRunFlags(
      argv("--api", "unix:///run/kpng.sock", "--node-name", "n2", "--once", "--tls-ca", "/dev/null"),
    );
    assert.equal(flags.api, "unix:///run/kpng.sock");
    assert.equal(flags.once, true);
    assert.equal(flags.tls.ca, "/dev/null");
  });

  const bad: { name: string; flags: string[]; message: RegExp }[] = [
    { name: "an unknown flag is named", flags: ["--bogus"], message: /unknown option '--bogus'/ },
    {
      name: "a flag without its value says so",
      flags: ["--api"],
      message: /--api <target>.*argument missing/,
    },
    {
      name: "an API address without a port",
      flags: ["--api", "localhost"],
      message: /--api localhost: expected/,
    },
    { name: "a relative unix socket path", flags: ["--api", "unix://run/x.sock"], message: /absolute path/ },
    { name: "a port out of range", flags: ["--api", "tcp://127.0.0.1:70000"], message: /expected/ },
    {
      name: "a client certificate without its key",
      flags: ["--tls-cert", "c.pem"],
      message: /--tls-cert and --tls-key go together/,
    },
    {
      name: "an unreadable CA file names the file",
      flags: ["--tls-ca", "/nonexistent/ca.pem"],
      message: /--tls-ca \/nonexistent\/ca.pem: ENOENT/,
    },
    { name: "an empty node name", flags: ["--node-name", ""], message: /--node-name must not be empty/ },
  ];
  for (const row of bad) {
    test(`bad flags: ${row.name}`, () => {
      assert.throws(
        () => parseRunFlags(argv("--node-name", "n1", ...row.flags)),
        (err: Error) => err instanceof UsageError && row.message.test(err.message),
      );
    });
  }
});
