/* SPDX-License-Identifier: MIT */
/*
 * progress: who runs a software NIC's (or an emulated device's) work, a
 * thread of its own or the caller's polls (docs/progress.md). The one rule
 * of `progress=auto` and the process-wide count of spinning threads it
 * weighs, shared by every piece that can run either way (soft+udp's NIC,
 * the soft NIC's mlx5 engine, the GPU emulation; the bridge's pump and the
 * daemon's dispatcher threads count themselves in). Set-up paths only.
 */
#ifndef QL_PROVIDERS_PROGRESS_H
#define QL_PROVIDERS_PROGRESS_H

#include <stdbool.h>

#define QL__PROGRESS_HIDDEN __attribute__((visibility("hidden")))

enum ql__progress_mode {
	QL__PROGRESS_AUTO = 0,
	QL__PROGRESS_THREAD,
	QL__PROGRESS_CALLER,
};

/* "thread", "caller", "auto" -> the mode; -EINVAL for anything else. */
QL__PROGRESS_HIDDEN int ql__progress_parse(const char *s, enum ql__progress_mode *m);
QL__PROGRESS_HIDDEN const char *ql__progress_str(enum ql__progress_mode m);

/* The mode when nothing names one: the QLINK_PROGRESS environment variable
 * if set to one of the three names, else (unset, or any other value, which
 * is ignored) auto. An explicit option, `progress=auto` included, wins. */
QL__PROGRESS_HIDDEN enum ql__progress_mode ql__progress_default(void);

/* The auto rule (docs/progress.md §2), the one every piece weighs: caller
 * progress when the process has fewer free cores than spinning threads.
 * Free cores: `cpus` (its sched_getaffinity mask) less the caller's own
 * thread, which polls, and less one left to the rest of the host (a peer
 * on the same host, the kernel's network work, the daemon). Spinning
 * threads: `spinning` (qlink's threads spinning now in the process) plus
 * `more` (those the piece being set up would start). Pure: the table the
 * tests check. */
QL__PROGRESS_HIDDEN bool ql__progress_rule(unsigned cpus, unsigned spinning, unsigned more);
/* The rule for this process now: its affinity mask, ql__progress_threads. */
QL__PROGRESS_HIDDEN bool ql__progress_auto_caller(unsigned more);
/* THREAD and CALLER are themselves; AUTO is the rule's answer. */
QL__PROGRESS_HIDDEN enum ql__progress_mode ql__progress_resolve(enum ql__progress_mode m,
								unsigned more);

/* The spinning threads of this process (each adds 1 when it starts and -1
 * when it ends), which the auto rule weighs. */
QL__PROGRESS_HIDDEN void ql__progress_threads_add(int delta);
QL__PROGRESS_HIDDEN unsigned ql__progress_threads(void);

#endif
