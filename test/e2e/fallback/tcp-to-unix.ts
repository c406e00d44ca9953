// Relays TCP connections on 127.0.0.1:<port> to a unix socket: run inside a network namespace,
// it lets a process there reach a server in the test's own namespace (unix socket paths are not
// namespaced). Usage: node tcp-to-unix.ts <port> <socket path>

import { createConnection, createServer } from "node:net";

const [port, path] = process.argv.slice(2);
const server = createServer((client) => {
  const upstream = createConnection(path!);
  client.pipe(upstream).pipe(client);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on("error", close);
  upstream.on("error", close);
});
server.listen(Number(port), "127.0.0.1", () => process.stdout.write(`listening on ${port}\n`));
