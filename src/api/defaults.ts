// Where the watch API listens by default: a unix socket, created 0600, so that on a shared host
// only root reaches it (a loopback TCP port is open to every local process and hostNetwork pod).
// The server's --listen and the clients' --api share it.

export const DEFAULT_SOCKET_DIR = "/run/kpng";
export const DEFAULT_LISTEN = `unix://${DEFAULT_SOCKET_DIR}/proxy.sock`;
