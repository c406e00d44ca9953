// Typed reads of raw JSON fields. Each reader names the field path in its error, so a rejected
// object says exactly what is wrong: "spec.ports[1].port: 70000 is out of range 1-65535".

import { EMPTY_MAP, mapOrEmpty } from "./shared-values.ts";

/** Thrown by the readers; validate.ts turns it into a ParseResult. */
export class InvalidField extends Error {
  override readonly name = "InvalidField";
}

export type RawObject = Readonly<Record<string, unknown>>;

/** A short description of a raw value for error messages. */
function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string")
    return JSON.stringify(value.length > 64 ? `${value.slice(0, 61)}...` : value);
  if (typeof value === "object") return "an object";
  return `${typeof value} ${String(value)}`;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function object(value: unknown, path: string): RawObject {
  if (!isPlainObject(value)) throw new InvalidField(`${path}: expected an object, got ${describe(value)}`);
  return value;
}

/** Absent or null reads as an empty object, as the API omits empty structs. */
export function optionalObject(value: unknown, path: string): RawObject {
  return value === undefined || value === null ? {} : object(value, path);
}

/** Absent or null reads as an empty list. */
export function optionalArray(value: unknown, path: string): readonly unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new InvalidField(`${path}: expected a list, got ${describe(value)}`);
  return value;
}

export function requiredString(value: unknown, path: string): string {
  if (value === undefined || value === null || value === "") throw new InvalidField(`${path}: is required`);
  if (typeof value !== "string") throw new InvalidField(`${path}: expected a string, got ${describe(value)}`);
  return value;
}

export function optionalString(value: unknown, path: string, fallback = ""): string {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "string") throw new InvalidField(`${path}: expected a string, got ${describe(value)}`);
  return value;
}

/** One of a fixed set of strings; absent, null or "" gives the fallback (the API default). */
export function oneOf<const T extends string>(
  value: unknown,
  path: string,
  allowed: readonly T[],
  fallback?: T,
): T {
  if ((value === undefined || value === null || value === "") && fallback !== undefined) return fallback;
  if (typeof value === "string" && (allowed as readonly string[]).includes(value)) return value as T;
  if (value === undefined || value === null || value === "") throw new InvalidField(`${path}: is required`);
  throw new InvalidField(`${path}: ${describe(value)} is not one of ${allowed.join(", ")}`);
}

export function integer(value: unknown, path: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new InvalidField(`${path}: expected an integer, got ${describe(value)}`);
  }
  if (value < min || value > max) throw new InvalidField(`${path}: ${value} is out of range ${min}-${max}`);
  return value;
}

/** An integer that is absent (or null) reads as the fallback. */
export function optionalInteger(
  value: unknown,
  path: string,
  min: number,
  max: number,
  fallback: number,
): number {
  return value === undefined || value === null ? fallback : integer(value, path, min, max);
}

/** true, false, or null when absent. */
export function optionalBoolean(value: unknown, path: string): boolean | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "boolean")
    throw new InvalidField(`${path}: expected true, false or null, got ${describe(value)}`);
  return value;
}

/** A string-to-string map such as labels or annotations. */
export function stringMap(value: unknown, path: string): Readonly<Record<string, string>> {
  if (value === undefined || value === null) return EMPTY_MAP;
  const raw = object(value, path);
  const out: Record<string, string> = {};
  // Not Object.entries: a pair per field, for the labels of every object.
  for (const key in raw) {
    if (!Object.hasOwn(raw, key)) continue;
    const v = raw[key];
    if (typeof v !== "string")
      throw new InvalidField(`${path}[${JSON.stringify(key)}]: expected a string, got ${describe(v)}`);
    out[key] = v;
  }
  return mapOrEmpty(out);
}
