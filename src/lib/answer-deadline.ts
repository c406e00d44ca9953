// The deadline of an answer that arrives as I/O: a command's exit, a reply on a pipe. kpng's one
// thread can be busy for seconds (a cluster file parsed at 100k Services, a first state built)
// while a command it started runs and answers. When the thread comes back, the timer and the
// answer are both due, and the timer may run first: alone, it would report a command that
// answered in time as one that did not. The deadline therefore lets the event loop read what has
// arrived before it counts as passed: one turn, and while the answer is coming in (a command that
// exited, whose pipes' ends follow a turn or two later), a few more.

export interface AnswerDeadline {
  /** The answer came: the deadline no longer runs out. */
  clear(): void;
}

/** Turns of the event loop an answer that has begun to arrive gets to arrive whole. */
const MAX_LATE_TURNS = 10;

/**
 * Calls `expired` once `ms` have passed and the I/O that arrived by then has been read.
 * `arriving` says whether the answer has begun to arrive (it then gets up to MAX_LATE_TURNS more).
 */
export function answerDeadline(
  ms: number,
  expired: () => void,
  arriving: () => boolean = () => false,
): AnswerDeadline {
  let late: NodeJS.Immediate | undefined;
  const lateTurn = (turn: number) => {
    late = setImmediate(() => {
      if (turn < MAX_LATE_TURNS && arriving()) lateTurn(turn + 1);
      else expired();
    });
  };
  const timer = setTimeout(() => lateTurn(0), ms);
  return {
    clear() {
      clearTimeout(timer);
      if (late !== undefined) clearImmediate(late);
    },
  };
}
