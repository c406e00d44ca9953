// The names the Service fallback selector shares between its controller (which writes fallback
// EndpointSlices) and every proxy that reads them.

/** Service annotation: label selector of the pods that serve when the Service's own have none ready. */
export const ANNOTATION_FALLBACK_SELECTOR = "fallback.kpng.io/selector";
/** Service annotation: how long the primary must stay ready before traffic returns to it. */
export const ANNOTATION_FALLBACK_RETURN_DELAY = "fallback.kpng.io/return-delay";
export const DEFAULT_FALLBACK_RETURN_DELAY = "10s";

export const LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by";
/** The managed-by value that marks an EndpointSlice as a fallback slice. */
export const FALLBACK_MANAGER = "fallback.kpng.io";
/** On fallback slices: "true" while the Service is served by its fallback pods, else "false". */
export const LABEL_FALLBACK_ACTIVE = "fallback.kpng.io/active";
