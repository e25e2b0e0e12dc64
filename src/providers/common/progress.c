// SPDX-License-Identifier: MIT
/* progress=thread|caller|auto: the shared rule (progress.h). */
#define _GNU_SOURCE
#include "providers/common/progress.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = { "auto", "thread", "caller" };

static int spinning_now; /* __atomic builtins only */

int ql__progress_parse(const char *s, enum ql__progress_mode *m)
{
	for (int i = 0; s && i < 3; i++) {
		if (!strcmp(s, names[i])) {
			*m = (enum ql__progress_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *ql__progress_str(enum ql__progress_mode m)
{
	return (unsigned)m < 3 ? names[m] : "?";
}

enum ql__progress_mode ql__progress_default(void)
{
	enum ql__progress_mode m;

	if (ql__progress_parse(getenv("QLINK_PROGRESS"), &m))
		return QL__PROGRESS_AUTO;
	return m;
}

void ql__progress_threads_add(int delta)
{
	__atomic_add_fetch(&spinning_now, delta, __ATOMIC_RELAXED);
}

unsigned ql__progress_threads(void)
{
	int n = __atomic_load_n(&spinning_now, __ATOMIC_RELAXED);

	return n > 0 ? (unsigned)n : 0;
}

bool ql__progress_rule(unsigned cpus, unsigned spinning, unsigned more)
{
	/* one core is the caller's own thread's, one the rest of the host's */
	long free_cores = (long)cpus - 2;

	return free_cores < (long)spinning + (long)more;
}

bool ql__progress_auto_caller(unsigned more)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set))
		return true; /* unknown: the mode that needs no core */
	return ql__progress_rule((unsigned)CPU_COUNT(&set), ql__progress_threads(), more);
}

enum ql__progress_mode ql__progress_resolve(enum ql__progress_mode m, unsigned more)
{
	if (m != QL__PROGRESS_AUTO)
		return m;
	return ql__progress_auto_caller(more) ? QL__PROGRESS_CALLER : QL__PROGRESS_THREAD;
}
