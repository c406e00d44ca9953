// The kpng executable. Node's compile cache is turned on before the command's modules load, so
// that a start reads the compiled (type-stripped) modules from disk instead of compiling every
// one of them again: about half of a start's CPU (docs/performance.md, "Process start").
//
// The cache lives in the installation (`.cache/compile` beside `src/`), which only whoever may
// change kpng's own code can write; a shared directory such as /tmp would let another user plant
// code that a root process then runs. NODE_COMPILE_CACHE (another directory) and
// NODE_DISABLE_COMPILE_CACHE=1 are Node's own overrides. A cache that cannot be written is
// skipped silently by Node: it only costs the time it would have saved. bin/kpng and the image
// set NODE_COMPILE_CACHE to this directory before Node starts, so that this file is read from
// the cache too; the call below is then a no-op, and serves `node src/cli/main.ts` run by hand.

import { enableCompileCache } from "node:module";
import { fileURLToPath } from "node:url";

enableCompileCache(fileURLToPath(new URL("../../.cache/compile", import.meta.url)));

const { runCommand } = await import("./command.ts");
// Exit explicitly: a finished sink means the work is done, even if a library keeps a handle open.
process.exit(await runCommand(process.argv.slice(2)));
