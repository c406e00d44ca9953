// What a parsed command line asks for: one of the four grammar forms, with its plug-ins and their
// options, already checked and typed by each plug-in's parseOptions. program.ts produces it,
// run.ts carries it out.

import type {
  ControllerPlugin,
  GlobalSinkPlugin,
  LocalSinkPlugin,
  LocalSourcePlugin,
  SourcePlugin,
} from "../plugin/contracts.ts";
import type { ExplainRequest } from "./explain.ts";
import type { SinkRun } from "./multi-sink.ts";

export type Invocation =
  /** `kpng <source> … to-local <local-sink> …` */
  | {
      readonly form: "to-local";
      readonly source: SourcePlugin;
      readonly sourceOpts: unknown;
      readonly sink: LocalSinkPlugin;
      readonly sinkOpts: unknown;
      readonly serviceProxyName: string;
      /** --service-cidrs: fixed Service IP ranges; undefined: from ServiceCIDR objects. */
      readonly serviceCIDRs: readonly string[] | undefined;
      readonly nodeName: string;
      readonly minSyncPeriodMs: number;
      /** Further sinks (`to-local to-nft … to-iptables --service-proxy-name legacy …`), each with its own name. */
      readonly moreSinks?: readonly SinkRun[];
    }
  /** `kpng <source> … <global-sink> …` */
  | {
      readonly form: "global";
      readonly source: SourcePlugin;
      readonly sourceOpts: unknown;
      readonly sink: GlobalSinkPlugin;
      readonly sinkOpts: unknown;
      readonly serviceProxyName: string;
      /** --service-cidrs: fixed Service IP ranges; undefined: from ServiceCIDR objects. */
      readonly serviceCIDRs: readonly string[] | undefined;
    }
  /** `kpng local … <local-sink> …` */
  | {
      readonly form: "local";
      readonly localSource: LocalSourcePlugin;
      readonly sourceOpts: unknown;
      readonly sink: LocalSinkPlugin;
      readonly sinkOpts: unknown;
      /** --service-proxy-name; undefined: the remote brain's own. */
      readonly serviceProxyName: string | undefined;
      readonly nodeName: string;
      readonly minSyncPeriodMs: number;
    }
  /** `kpng cleanup <backend> …` */
  | { readonly form: "cleanup"; readonly sink: LocalSinkPlugin; readonly sinkOpts: unknown }
  /** `kpng explain NAMESPACE/NAME | IP:PORT …` */
  | { readonly form: "explain"; readonly request: ExplainRequest }
  /** `kpng <controller> …`, e.g. `kpng fallback-controller` */
  | { readonly form: "controller"; readonly controller: ControllerPlugin; readonly opts: unknown };

export interface Plugins {
  readonly sources: readonly SourcePlugin[];
  readonly localSinks: readonly LocalSinkPlugin[];
  readonly globalSinks: readonly GlobalSinkPlugin[];
  readonly localSources: readonly LocalSourcePlugin[];
  readonly controllers?: readonly ControllerPlugin[];
}
