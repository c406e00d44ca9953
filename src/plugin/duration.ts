// Command-line flags read durations with the model's parser (Service annotations use it too).
export { parseDuration } from "../model/duration.ts";
