// The environment every command kpng starts runs in, and the one the image and bin/kpng give
// kpng itself: glibc's malloc told to back its heap with transparent huge pages.
//
// A large `nft -f` (and kpng's own first state) spends much of its time in page faults: malloc
// grows the heap 4 KiB page by page, and each first touch is a fault in which the kernel
// clears the page. With `glibc.malloc.hugetlb=1` (glibc 2.35 and later) malloc asks for
// transparent huge pages on what it maps (madvise), so one fault brings 2 MiB. It changes
// nothing where THP is off (`never`) or always on, and glibc builds that do not know the
// tunable, or other C libraries, ignore it. An operator who sets `glibc.malloc.hugetlb`
// themselves keeps their value (`=0` turns it off).

/** The tunable, as GLIBC_TUNABLES spells it. */
export const HUGE_PAGE_MALLOC = "glibc.malloc.hugetlb=1";

/** `env` with HUGE_PAGE_MALLOC added to GLIBC_TUNABLES, unless it already says hugetlb. */
export function withHugePageMalloc(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const tunables = env.GLIBC_TUNABLES ?? "";
  if (tunables.split(":").some((t) => t.startsWith("glibc.malloc.hugetlb="))) return env;
  return { ...env, GLIBC_TUNABLES: tunables === "" ? HUGE_PAGE_MALLOC : `${tunables}:${HUGE_PAGE_MALLOC}` };
}
