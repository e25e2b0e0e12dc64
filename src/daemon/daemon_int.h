/* SPDX-License-Identifier: MIT */
/*
 * The daemon's state, shared by daemon.c and dispatcher.c (internal).
 */
#ifndef QL_DAEMON_INT_H
#define QL_DAEMON_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "qlink/daemon.h"
#include "qlink/dispatcher.h"

/*
 * Where a thread that runs handlers publishes the call in progress, for the
 * watchdog (another thread) and the crash report (a signal handler on this
 * thread). One per dispatcher thread instance; a thread abandoned to a
 * handler that overran its deadline keeps its own, which is never freed.
 *
 * call_t0 is the protocol: the thread stores the call's start (TSC, odd,
 * release) before the handler and takes it back with an atomic exchange
 * after; the watchdog claims an expired call by compare-and-swap of the
 * same value to QL__CALL_ABANDONED. Exactly one of them wins: if the
 * watchdog did, the thread's exchange returns QL__CALL_ABANDONED and the
 * thread exits at once, touching nothing but its failed daemon's buffers.
 */
#define QL__CALL_ABANDONED UINT64_MAX

struct ql__dthread {
	uint64_t call_t0;	       /* 0: no call; TSC | 1; QL__CALL_ABANDONED */
	const char *call_name;	       /* the function of that call */
	struct ql_daemon *call_daemon; /* and its daemon */
	struct ql_dispatcher *p;
	pthread_t thread;
	pid_t tid;
	int exited;		  /* the thread left its loop */
	void *altstack;		  /* signal stack of the thread (crash report) */
	bool altstack_kept;	  /* it had one already (a sanitizer's): ours unused */
	struct ql__dthread *next; /* on the list of abandoned threads */
};

struct ql_daemon {
	struct ql_daemon_config cfg;
	struct ql_channel *ch;
	struct ql_rpc_table *table;
	pthread_mutex_t lock;	    /* guards disp and own */
	struct ql_dispatcher *disp; /* serving it now, NULL when detached */
	struct ql_dispatcher *own;  /* the private one of ql_daemon_start */
	_Atomic int stop;	    /* give up a burst stuck without buffers */
	struct ql_daemon_stats st;
	uint64_t *fn_calls;
	uint64_t *fn_errors;
	uint64_t *fn_overruns;
	uint64_t tick_ns_q32; /* ns per TSC tick, 32.32 fixed point */
	struct ql_hist hist;
	struct ql__dthread solo; /* ql_daemon_poll's call slot */
	/* set once by a watchdog: failed_fn first, then failed (release) */
	int failed; /* 0, or -ETIMEDOUT */
	char failed_fn[64];
	struct ql_daemon *next_quarantined;
};

#define QL_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* One burst of d in the thread that publishes its calls in w. */
int ql__daemon_poll(struct ql_daemon *d, struct ql__dthread *w);
/* Called by the watchdog once it claimed a call of d: d is failed. */
void ql__daemon_fail(struct ql_daemon *d, const char *fn, int err);
/* The thread lost its call to the watchdog: leave without touching more. */
void ql__dthread_abandoned(void) __attribute__((noreturn));

#endif
