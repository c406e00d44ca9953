import assert from "node:assert/strict";
import { test } from "node:test";
import { Command } from "commander";
import { ebpfPlugin, renderContext } from "../../../../src/backends/ebpf/plugin.ts";
import { nftCompanion } from "../../../../src/backends/nft/plugin.ts";

const HOST = ["127.0.0.1", "::1", "192.0.2.1", "2001:db8::1", "198.51.100.7"];

const rows: {
  readonly name: string;
  readonly cidrs: readonly string[];
  readonly localhost: boolean;
  readonly want: { readonly IPv4: readonly string[]; readonly IPv6: readonly string[] };
}[] = [
  {
    name: "every address (iptables mode's default): 127.0.0.1 too, ::1 never",
    cidrs: ["0.0.0.0/0", "::/0"],
    localhost: true,
    want: { IPv4: ["192.0.2.1", "198.51.100.7", "127.0.0.1"], IPv6: ["2001:db8::1"] },
  },
  {
    name: "localhost NodePorts turned off: no loopback address",
    cidrs: ["0.0.0.0/0", "::/0"],
    localhost: false,
    want: { IPv4: ["192.0.2.1", "198.51.100.7"], IPv6: ["2001:db8::1"] },
  },
  {
    name: "NodePort CIDRs without 127.0.0.1 (nftables mode's primary IPs): no localhost",
    cidrs: ["192.0.2.1/32", "2001:db8::1/128"],
    localhost: true,
    want: { IPv4: ["192.0.2.1"], IPv6: ["2001:db8::1"] },
  },
  {
    name: "a loopback CIDR given: 127.0.0.1, and ::1/128 still never",
    cidrs: ["127.0.0.0/8", "::1/128"],
    localhost: true,
    want: { IPv4: ["127.0.0.1"], IPv6: [] },
  },
];

for (const r of rows) {
  test(`NodePort addresses of the sockets, per family: ${r.name}`, () => {
    const ctx = renderContext({ hostIPs: HOST, nodePortCIDRs: r.cidrs }, r.localhost);
    assert.deepEqual(ctx.nodePortIPs, r.want);
  });
}

test("--no-localhost-nodeports turns localhost NodePorts off; on by default, as kube-proxy's iptables mode", () => {
  const parse = (argv: string[]) => {
    const plugin = ebpfPlugin(nftCompanion);
    const cmd = new Command().exitOverride();
    plugin.addOptions(cmd);
    cmd.parse(argv, { from: "user" });
    return plugin.parseOptions(cmd.opts()).localhostNodePorts;
  };
  assert.equal(parse([]), true);
  assert.equal(parse(["--no-localhost-nodeports"]), false);
});
