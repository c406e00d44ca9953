// `kpng local --api <target> <local-sink>`: run any local sink against a remote brain.

import { remoteLocalStateFeed } from "../../client/feed.ts";
import { type ApiClientFlags, addApiOptions, apiClientOptions } from "../../client/tls-options.ts";
import type { LocalSourcePlugin } from "../../plugin/contracts.ts";

export const localSourcePlugin: LocalSourcePlugin<ApiClientFlags> = {
  name: "local",
  description: "watch one node's local state from a brain's API (kpng <source> to-api)",
  addOptions: addApiOptions,
  parseOptions: apiClientOptions,
  createFeed(opts, nodeName, ctx, serviceProxyName) {
    return remoteLocalStateFeed({
      api: opts.api,
      nodeName,
      serviceProxyName,
      tls: opts.tls,
      signal: ctx.signal,
      log: ctx.log,
    });
  },
};
