// A Translation as a kpng command line: `kube [source options] to-local <sink> [sink options]`.
// Options the plug-ins of this build do not offer yet are returned apart, for the caller to report.

import type { KpngOption, Translation } from "./translate.ts";

interface KpngArgv {
  readonly argv: string[];
  /** Options left out because the plug-in has no such flag in this build. */
  readonly unavailable: KpngOption[];
}

/** `accepts(plugin, flag)`: whether the plug-in ("kube", "to-nft", …) has the flag. */
export function toKpngArgv(t: Translation, accepts: (plugin: string, flag: string) => boolean): KpngArgv {
  const unavailable: KpngOption[] = [];
  const words = (plugin: string, options: readonly KpngOption[]): string[] =>
    options.flatMap((o) => {
      if (o.value === false) return [];
      if (!accepts(plugin, o.flag)) {
        unavailable.push(o);
        return [];
      }
      return o.value === true ? [o.flag] : [o.flag, o.value];
    });
  const argv = [
    t.source.name,
    ...words(t.source.name, t.source.options),
    "to-local",
    t.sink.name,
    ...words(t.sink.name, t.sink.options),
  ];
  return { argv, unavailable };
}
