// `kpng local --api <target> <local-sink>`: run any local sink against a remote brain.

import { remoteLocalStateFeed } from "../../client/feed.ts";
import { addApiOptions, DEFAULT_API, tlsFromOptions } from "../../client/tls-options.ts";
import type { LocalSourcePlugin } from "../../plugin/contracts.ts";

export const localSourcePlugin: LocalSourcePlugin = {
  name: "local",
  description: "watch one node's local state from a brain's API (kpng <source> to-api)",
  addOptions: addApiOptions,
  createFeed(opts, nodeName, ctx) {
    return remoteLocalStateFeed({
      api: (opts.api as string | undefined) ?? DEFAULT_API,
      nodeName,
      tls: tlsFromOptions(opts),
      signal: ctx.signal,
      log: ctx.log,
    });
  },
};
