// Startup checks of to-ebpf: everything the programs need, checked before anything is attached.
// Each problem names what is missing and how to fix it; the CLI exits 2.

import { spawnSync } from "node:child_process";
import { accessSync, constants, existsSync, statfsSync } from "node:fs";

const BPF_FS_MAGIC = 0xcafe4a11;
const CGROUP2_SUPER_MAGIC = 0x63677270;

interface CheckSettings {
  readonly bpfRoot: string;
  readonly cgroupRoot: string;
  readonly object: string;
}

/** The cgroup v2 root of this host: the unified mount on a hybrid layout. */
export function defaultCgroupRoot(): string {
  return existsSync("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified";
}

function fsType(path: string): number | undefined {
  try {
    return statfsSync(path).type;
  } catch {
    return undefined;
  }
}

/** What keeps the eBPF backend from running here; empty when nothing does. */
export function startupProblems(s: CheckSettings): string[] {
  const problems: string[] = [];
  if (!existsSync("/proc/sys/kernel/unprivileged_bpf_disabled")) {
    problems.push(
      "the kernel has no BPF syscall (CONFIG_BPF_SYSCALL): use a kernel built with it, or another backend",
    );
  }
  if (!existsSync("/sys/kernel/btf/vmlinux")) {
    problems.push(
      "the kernel has no BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF): use a kernel built with it",
    );
  }
  if (fsType(s.cgroupRoot) !== CGROUP2_SUPER_MAGIC) {
    problems.push(
      `--cgroup-root ${s.cgroupRoot} is not a cgroup v2 directory: mount one (mount -t cgroup2 none /sys/fs/cgroup/unified) and pass it`,
    );
  }
  if (fsType(s.bpfRoot) !== BPF_FS_MAGIC) {
    problems.push(`--bpf-root ${s.bpfRoot} is not a bpffs: mount it (mount -t bpf bpf ${s.bpfRoot})`);
  } else {
    try {
      accessSync(s.bpfRoot, constants.W_OK);
    } catch {
      problems.push(
        `--bpf-root ${s.bpfRoot} is not writable: run as root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN)`,
      );
    }
  }
  if (process.getuid?.() !== 0) {
    problems.push("loading and attaching BPF programs needs root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN)");
  }
  if (!existsSync(s.object)) {
    problems.push(`--bpf-object ${s.object} does not exist: build it with npm run build:bpf`);
  }
  const tool = spawnSync("bpftool", ["version"], { timeout: 5000, stdio: "ignore" });
  if (tool.error !== undefined || tool.status !== 0)
    problems.push("bpftool does not run: apt-get install bpftool");
  return problems;
}
