// JSON logs to stderr (stdout belongs to dumps such as to-json). One root logger; components take
// a child with their name.

import { type Logger, pino } from "pino";

export type { Logger };

const level = process.env.KPNG_LOG_LEVEL ?? "info";

export const rootLogger: Logger = pino(
  { level, base: { app: "kpng" } },
  pino.destination({ fd: 2, sync: true }),
);

export function componentLogger(component: string): Logger {
  return rootLogger.child({ component });
}

/** A logger that drops everything, for tests that do not read logs. */
export const silentLogger: Logger = pino({ level: "silent" });
