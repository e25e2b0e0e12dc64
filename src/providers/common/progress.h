/* SPDX-License-Identifier: MIT */
/*
 * progress: who runs a software NIC's (or an emulated device's) work, a
 * thread of its own or the caller's polls (docs/progress.md). The one rule
 * of `progress=auto` and the process-wide count of spinning threads it
 * weighs, shared by every piece that can run either way (the soft NIC's
 * mlx5 engine, the GPU emulation, the bridge's pump). Set-up paths only.
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
 * if set to one of the three names, else auto. */
QL__PROGRESS_HIDDEN enum ql__progress_mode ql__progress_default(void);

/* The auto rule: caller progress when the process has fewer free cores
 * (the CPUs of its sched_getaffinity mask, less the caller's own) than
 * spinning threads would need (those running now, ql__progress_threads,
 * plus `more`). THREAD and CALLER resolve to themselves. */
QL__PROGRESS_HIDDEN bool ql__progress_auto_caller(unsigned more);
QL__PROGRESS_HIDDEN enum ql__progress_mode ql__progress_resolve(enum ql__progress_mode m,
								unsigned more);

/* The spinning threads of this process (each adds 1 when it starts and -1
 * when it ends), which the auto rule weighs. */
QL__PROGRESS_HIDDEN void ql__progress_threads_add(int delta);
QL__PROGRESS_HIDDEN unsigned ql__progress_threads(void);

#endif
