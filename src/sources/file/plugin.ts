// `kpng file --input cluster.yaml …`: the file source as a CLI plug-in.

import type { Command } from "commander";
import { z } from "zod";
import type { ClusterSource } from "../../model/global.ts";
import { parseByteSize } from "../../plugin/byte-size.ts";
import type { SourceContext, SourcePlugin } from "../../plugin/contracts.ts";
import { parseOptionsWith, requiredText } from "../../plugin/options.ts";
import { DEFAULT_MAX_INPUT_BYTES, FileSource } from "./source.ts";

const fileOptions = z.object({
  input: requiredText("the path of a file"),
  // --no-watch sets false; absent means the default, watching.
  watch: z.boolean().optional().default(true),
  maxInputSize: z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined) return DEFAULT_MAX_INPUT_BYTES;
      try {
        return parseByteSize(value);
      } catch (err) {
        ctx.addIssue({ code: "custom", message: (err as Error).message });
        return z.NEVER;
      }
    }),
});

type FileFlags = z.output<typeof fileOptions>;

export const fileSourcePlugin: SourcePlugin<FileFlags> = {
  name: "file",
  description: "read Services, EndpointSlices and Nodes from a Kubernetes YAML or JSON file",
  addOptions(cmd: Command): void {
    cmd
      .requiredOption("-i, --input <path>", "the YAML or JSON file (multi-document, kind: List) to read")
      .option("--watch", "re-read the file when it changes (default)")
      .option("--no-watch", "read the file once and never again")
      .option("--max-input-size <size>", "refuse a larger file (bytes, or with Ki, Mi, Gi)", "512Mi");
  },
  parseOptions: (raw) => parseOptionsWith(fileOptions, raw),
  create(opts: FileFlags, ctx: SourceContext): ClusterSource {
    return new FileSource({
      path: opts.input,
      watch: opts.watch,
      maxBytes: opts.maxInputSize,
      log: ctx.log.child({ component: "file-source" }),
    });
  },
};
