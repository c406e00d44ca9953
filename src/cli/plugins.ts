// Every source and sink the CLI offers. Add a plug-in by importing it and listing it here; the
// command tree (program.ts) is built from these arrays.

import { toApiPlugin } from "../api/plugin.ts";
import { ebpfListCommand } from "../backends/ebpf/list.ts";
import { ebpfPlugin } from "../backends/ebpf/plugin.ts";
import { toIptablesPlugin } from "../backends/iptables/plugin.ts";
import { nftCompanion, toNftPlugin } from "../backends/nft/plugin.ts";
import { fallbackControllerPlugin } from "../controllers/fallback/plugin.ts";
import type {
  ControllerPlugin,
  GlobalSinkPlugin,
  LocalSinkPlugin,
  LocalSourcePlugin,
  SourcePlugin,
} from "../plugin/contracts.ts";
import { toJsonGlobalSink, toJsonLocalSink } from "../sinks/json/plugins.ts";
import { apiSourcePlugin } from "../sources/api/api-source.ts";
import { localSourcePlugin } from "../sources/api/local-source-plugin.ts";
import { fileSourcePlugin } from "../sources/file/plugin.ts";
import { kubeSourcePlugin } from "../sources/kube/plugin.ts";

/** `kpng <source> …` */
export const sources: SourcePlugin[] = [fileSourcePlugin, kubeSourcePlugin, apiSourcePlugin];

/** `… to-local <sink>` and `kpng local … <sink>` */
export const localSinks: LocalSinkPlugin[] = [
  toJsonLocalSink,
  toNftPlugin,
  toIptablesPlugin,
  ebpfPlugin(nftCompanion),
];

/** `kpng <source> … <sink>` */
export const globalSinks: GlobalSinkPlugin[] = [toJsonGlobalSink, toApiPlugin];

/** `kpng <local-source> … <sink>`, e.g. `kpng local --api …` */
export const localSources: LocalSourcePlugin[] = [localSourcePlugin];

/** `kpng <controller> …`, e.g. `kpng fallback-controller` */
export const controllers: ControllerPlugin[] = [fallbackControllerPlugin, ebpfListCommand];
