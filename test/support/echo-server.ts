// The echo server for pod namespaces (implementation in tools/netns/echo-server.ts):
//
//   ip netns exec NS <node> test/support/echo-server.ts --name web-1 --port 8080 [--udp-port 53]

import { fileURLToPath } from "node:url";
import { echoServerMain } from "../../tools/netns/echo-server.ts";

export { type EchoReply, parseEchoReply, unmapAddress } from "../../tools/netns/echo-reply.ts";
export {
  type EchoServerOptions,
  parseEchoServerArgs,
  type RunningEchoServer,
  startEchoServer,
} from "../../tools/netns/echo-server.ts";

/** This script's path, for `spawn(process.execPath, [ECHO_SERVER_SCRIPT, …])`. */
export const ECHO_SERVER_SCRIPT = fileURLToPath(import.meta.url);

if (import.meta.main) await echoServerMain(process.argv.slice(2));
