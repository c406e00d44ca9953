// kube-proxy's command-line flags, parsed as kube-proxy parses them (`--flag=value`,
// `--flag value`, a bare `--flag` for true, `_` for `-`) into the configuration fields they set
// (the field table in table.ts names each field's flag), plus the flags that set no field.
//
// As in kube-proxy, a --config file makes the flags that set fields ignored, except the logging
// flags and --hostname-override: `ignored` names them so the caller can say so.

import { UsageError } from "../plugin/usage-error.ts";
import { typeProblem } from "./config-file.ts";
import { type FieldType, OFF, TABLE } from "./table.ts";

interface FlagSpec {
  /** The configuration field the flag sets, or "" for the flags that set none. */
  readonly path: string;
  readonly type: FieldType;
}

/** Flags that set no configuration field, and their types. */
const OWN_FLAGS: Readonly<Record<string, FieldType>> = {
  config: "string",
  cleanup: "bool",
  master: "string",
  "write-config-to": "string",
  "init-only": "bool",
  version: "string",
  "healthz-port": "int",
  "metrics-port": "int",
  // klog/logging flags kpng accepts and maps to nothing: it logs JSON lines to stdout.
  "log-json-split-stream": "bool",
  "log-json-info-buffer-size": "string",
  "log-text-split-stream": "bool",
  "log-text-info-buffer-size": "string",
};

/** kube-proxy flag (without dashes) → what it sets. */
export const KUBE_PROXY_FLAGS: Readonly<Record<string, FlagSpec>> = {
  ...Object.fromEntries(Object.entries(OWN_FLAGS).map(([flag, type]) => [flag, { path: "", type }])),
  ...Object.fromEntries(
    TABLE.filter((r) => r.flag !== undefined).map((r) => [r.flag, { path: r.field, type: r.type }]),
  ),
};

/** Fields whose flags count even with --config (kube-proxy copies the logging flags over). */
const KEPT_WITH_CONFIG = new Set([
  "hostnameOverride",
  "logging.verbosity",
  "logging.vmodule",
  "logging.format",
  "logging.flushFrequency",
]);

export interface ParsedFlags {
  /** --config, if given. */
  readonly configFile: string | undefined;
  readonly cleanup: boolean;
  /** --master: the API server URL; kube-proxy has no field for it. */
  readonly master: string | undefined;
  readonly writeConfigTo: string | undefined;
  readonly initOnly: boolean;
  /** --version was given. */
  readonly version: boolean;
  /** Field path → value, for every flag given that counts. */
  readonly overrides: ReadonlyMap<string, unknown>;
  /** Flags given but ignored because --config was given (as kube-proxy), e.g. "--proxy-mode". */
  readonly ignored: readonly string[];
}

export function parseKubeProxyFlags(argv: readonly string[]): ParsedFlags {
  const set = new Map<string, unknown>();
  const own = new Map<string, unknown>();
  const given: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] ?? "";
    const m = /^--?([a-zA-Z][a-zA-Z0-9_-]*)(?:=(.*))?$/s.exec(word);
    if (m === null) throw new UsageError(`kube-proxy: unexpected argument ${JSON.stringify(word)}`);
    const name = (m[1] ?? "").replaceAll("_", "-");
    const spec = KUBE_PROXY_FLAGS[name];
    if (spec === undefined) throw new UsageError(`kube-proxy: unknown flag --${name}`);
    let text = m[2];
    if (text === undefined && spec.type !== "bool" && name !== "version") {
      text = argv[++i];
      if (text === undefined) throw new UsageError(`kube-proxy: flag --${name} needs a value`);
    }
    if (spec.path === "")
      own.set(name, name === "version" ? (text ?? "true") : flagValue(name, spec.type, text));
    else {
      // An empty bind address on the command line turns the server off (in a file it is the default).
      const off = spec.path.endsWith("BindAddress") && text?.trim() === "";
      set.set(spec.path, off ? OFF : flagValue(name, spec.type, text));
      given.push(name);
    }
  }
  const str = (key: string) => own.get(key) as string | undefined;
  const configFile = str("config");
  const counts = (path: string) => configFile === undefined || KEPT_WITH_CONFIG.has(path);
  const overrides = new Map([...set].filter(([path]) => counts(path)));
  if (configFile === undefined) applyPortFlags(own, overrides);
  return {
    configFile,
    cleanup: own.get("cleanup") === true,
    master: str("master"),
    writeConfigTo: str("write-config-to"),
    initOnly: own.get("init-only") === true,
    version: own.has("version") && own.get("version") !== "false",
    overrides,
    ignored: [
      ...given.filter((f) => !counts(KUBE_PROXY_FLAGS[f]?.path ?? "")),
      ...(configFile !== undefined ? ["healthz-port", "metrics-port"].filter((f) => own.has(f)) : []),
    ].map((f) => `--${f}`),
  };
}

/** The deprecated --healthz-port/--metrics-port: 0 turns the server off, else the port is set. */
function applyPortFlags(own: ReadonlyMap<string, unknown>, overrides: Map<string, unknown>): void {
  for (const [flag, field, host] of [
    ["healthz-port", "healthzBindAddress", "0.0.0.0"],
    ["metrics-port", "metricsBindAddress", "127.0.0.1"],
  ] as const) {
    const port = own.get(flag);
    if (typeof port !== "number") continue;
    if (port < 0 || port > 65535) throw new UsageError(`kube-proxy: flag --${flag}: ${port} is not a port`);
    const current = String(overrides.get(field) ?? host).replace(/:\d+$/, "");
    overrides.set(field, port === 0 ? OFF : `${current}:${port}`);
  }
}

/** The flag's text as the field's value, as pflag reads it. */
function flagValue(name: string, type: FieldType, text: string | undefined): unknown {
  let value: unknown;
  switch (type) {
    case "bool":
      value = text === undefined || text === "true" ? true : text === "false" ? false : text;
      break;
    case "int":
      value = /^-?\d+$/.test(text ?? "") ? Number(text) : text;
      break;
    case "float":
      value = /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text ?? "") ? Number(text) : text;
      break;
    case "stringList":
      value = (text ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
      break;
    case "boolMap": {
      const map: Record<string, unknown> = {};
      for (const pair of (text ?? "").split(",").filter((p) => p.trim() !== "")) {
        const [k, v] = pair.split("=");
        map[(k ?? "").trim()] = v?.trim() === "true" ? true : v?.trim() === "false" ? false : v;
      }
      value = map;
      break;
    }
    default:
      value = text;
  }
  const problem = typeProblem(type, value);
  if (problem !== undefined) throw new UsageError(`kube-proxy: flag --${name}: ${problem}`);
  return value;
}
