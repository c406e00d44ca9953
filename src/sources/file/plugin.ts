// `kpng file --input cluster.yaml …`: the file source as a CLI plug-in.

import type { Command } from "commander";
import type { ClusterSource } from "../../model/global.ts";
import type { Options, RunContext, SourcePlugin } from "../../plugin/contracts.ts";
import { FileSource } from "./source.ts";

export const fileSourcePlugin: SourcePlugin = {
  name: "file",
  description: "read Services, EndpointSlices and Nodes from a Kubernetes YAML or JSON file",
  addOptions(cmd: Command): void {
    cmd
      .requiredOption("-i, --input <path>", "the YAML or JSON file (multi-document, kind: List) to read")
      .option("--watch", "re-read the file when it changes (default)")
      .option("--no-watch", "read the file once and never again");
  },
  create(opts: Options, ctx: RunContext): ClusterSource {
    const input = opts.input;
    if (typeof input !== "string" || input === "") throw new Error("--input needs the path of a file");
    return new FileSource({
      path: input,
      watch: opts.watch !== false,
      log: ctx.log.child({ component: "file-source" }),
    });
  },
};
