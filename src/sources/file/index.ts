// The file source: Kubernetes YAML/JSON files as the cluster.

export { type ClusterFileContents, type ClusterFileParse, parseClusterFile } from "./parse.ts";
export { fileSourcePlugin } from "./plugin.ts";
export { FileSource, type FileSourceOptions } from "./source.ts";
