// A reflector's objects kept by key, with every change reported as (before, after).

import type { Keyed, ReflectorSink } from "../../kube/reflector.ts";
import { objectKey } from "../../model/kube.ts";

type ChangeListener<T> = (before: T | undefined, after: T | undefined) => void;

export class ObjectCache<T extends Keyed> implements ReflectorSink<string, T> {
  readonly #objects = new Map<string, T>();
  readonly #onChange: ChangeListener<T>;

  constructor(onChange: ChangeListener<T>) {
    this.#onChange = onChange;
  }

  get(key: string): T | undefined {
    return this.#objects.get(key);
  }

  values(): IterableIterator<T> {
    return this.#objects.values();
  }

  get size(): number {
    return this.#objects.size;
  }

  upsert(object: T): void {
    const key = objectKey(object.metadata);
    const before = this.#objects.get(key);
    this.#objects.set(key, object);
    this.#onChange(before, object);
  }

  delete(_kind: string, key: string): void {
    const before = this.#objects.get(key);
    if (before === undefined) return;
    this.#objects.delete(key);
    this.#onChange(before, undefined);
  }

  replace(_kind: string, objects: readonly T[]): void {
    const listed = new Set<string>();
    for (const object of objects) {
      const key = objectKey(object.metadata);
      listed.add(key);
      const before = this.#objects.get(key);
      this.#objects.set(key, object);
      if (before !== object) this.#onChange(before, object);
    }
    for (const [key, before] of this.#objects) {
      if (listed.has(key)) continue;
      this.#objects.delete(key);
      this.#onChange(before, undefined);
    }
  }
}
