// What a parsed command line asks for: one of the four grammar forms, with its plug-ins and
// options. program.ts produces it, run.ts carries it out.

import type {
  GlobalSinkPlugin,
  LocalSinkPlugin,
  LocalSourcePlugin,
  Options,
  SourcePlugin,
} from "../plugin/contracts.ts";

export type Invocation =
  /** `kpng <source> … to-local <local-sink> …` */
  | {
      readonly form: "to-local";
      readonly source: SourcePlugin;
      readonly sink: LocalSinkPlugin;
      readonly opts: Options;
      readonly serviceProxyName: string;
      /** --service-cidrs: fixed Service IP ranges; undefined: from ServiceCIDR objects. */
      readonly serviceCIDRs: readonly string[] | undefined;
      readonly nodeName: string;
      readonly minSyncPeriodMs: number;
    }
  /** `kpng <source> … <global-sink> …` */
  | {
      readonly form: "global";
      readonly source: SourcePlugin;
      readonly sink: GlobalSinkPlugin;
      readonly opts: Options;
      readonly serviceProxyName: string;
      readonly serviceCIDRs: readonly string[] | undefined;
    }
  /** `kpng local … <local-sink> …` */
  | {
      readonly form: "local";
      readonly localSource: LocalSourcePlugin;
      readonly sink: LocalSinkPlugin;
      readonly opts: Options;
      readonly nodeName: string;
    }
  /** `kpng cleanup <backend> …` */
  | { readonly form: "cleanup"; readonly sink: LocalSinkPlugin; readonly opts: Options };

export interface Plugins {
  readonly sources: readonly SourcePlugin[];
  readonly localSinks: readonly LocalSinkPlugin[];
  readonly globalSinks: readonly GlobalSinkPlugin[];
  readonly localSources: readonly LocalSourcePlugin[];
}
