// Command-line flags read durations with the model's parser (Service annotations use it too).
export { MAX_DURATION_MS, parseDuration } from "../model/duration.ts";
