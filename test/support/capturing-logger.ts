// A pino logger whose JSON lines a test can read.

import { Writable } from "node:stream";
import { type Level, pino } from "pino";

export function capturingLogger(level: Level = "debug") {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split("\n")) if (line !== "") lines.push(JSON.parse(line));
      done();
    },
  });
  return { log: pino({ level }, stream), lines };
}
