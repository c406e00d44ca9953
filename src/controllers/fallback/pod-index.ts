// Pods by namespace and by label: the pods a fallback selector may match, without scanning every
// pod of the cluster for each Service (2,000 Services × 50k pods would be 100M label matches).

import type { LabelSelector } from "../../model/label-selector.ts";
import type { Pod } from "./pod.ts";

const NONE: ReadonlySet<Pod> = new Set();

export class PodIndex {
  /** namespace → its pods. */
  readonly #byNamespace = new Map<string, Set<Pod>>();
  /** namespace → "key=value" → the pods with that label. */
  readonly #byLabel = new Map<string, Map<string, Set<Pod>>>();

  update(before: Pod | undefined, after: Pod | undefined): void {
    if (before !== undefined) this.#remove(before);
    if (after !== undefined) this.#add(after);
  }

  /** The pods of the namespace the selector matches. */
  matching(namespace: string, selector: LabelSelector): Pod[] {
    const out: Pod[] = [];
    for (const pod of this.#candidates(namespace, selector))
      if (selector.matches(pod.metadata.labels)) out.push(pod);
    return out;
  }

  /** The smallest set every match is in: an `in` requirement's labels, else the namespace. */
  #candidates(namespace: string, selector: LabelSelector): Iterable<Pod> {
    const labels = this.#byLabel.get(namespace);
    let best: Pod[] | undefined;
    for (const r of selector.requirements) {
      if (r.op !== "in" || labels === undefined) continue;
      const union = new Set<Pod>();
      for (const value of r.values) for (const pod of labels.get(`${r.key}=${value}`) ?? NONE) union.add(pod);
      if (best === undefined || union.size < best.length) best = [...union];
    }
    return best ?? this.#byNamespace.get(namespace) ?? NONE;
  }

  #add(pod: Pod): void {
    const ns = pod.metadata.namespace;
    let pods = this.#byNamespace.get(ns);
    if (pods === undefined) {
      pods = new Set();
      this.#byNamespace.set(ns, pods);
    }
    pods.add(pod);
    let labels = this.#byLabel.get(ns);
    if (labels === undefined) {
      labels = new Map();
      this.#byLabel.set(ns, labels);
    }
    for (const [key, value] of Object.entries(pod.metadata.labels)) {
      const label = `${key}=${value}`;
      let set = labels.get(label);
      if (set === undefined) {
        set = new Set();
        labels.set(label, set);
      }
      set.add(pod);
    }
  }

  #remove(pod: Pod): void {
    const ns = pod.metadata.namespace;
    const pods = this.#byNamespace.get(ns);
    pods?.delete(pod);
    if (pods?.size === 0) this.#byNamespace.delete(ns);
    const labels = this.#byLabel.get(ns);
    if (labels === undefined) return;
    for (const [key, value] of Object.entries(pod.metadata.labels)) {
      const label = `${key}=${value}`;
      const set = labels.get(label);
      set?.delete(pod);
      if (set?.size === 0) labels.delete(label);
    }
    if (labels.size === 0) this.#byLabel.delete(ns);
  }
}
