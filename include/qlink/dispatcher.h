/* SPDX-License-Identifier: MIT */
/*
 * dispatcher: one polling thread serving many daemons (channels) on one core.
 *
 * A dispatcher is a thread, pinned to a configured core, that polls the
 * channels of every daemon attached to it in turn (round robin), one burst
 * (up to the daemon's burst, at most 32 requests) per daemon per round.
 * Each daemon keeps its own function table, statistics and channel; the
 * dispatcher only decides which thread runs them. A process runs one
 * dispatcher per core it may use and spreads its channels over them.
 *
 * Daemons can be attached and detached while the dispatcher runs. The
 * round never takes a lock: the set of daemons is an array published by
 * pointer; between rounds the dispatcher loads the pointer and acknowledges
 * the set's generation, and attach/detach wait for that acknowledgement
 * before they return (so after detach the daemon is no longer touched) and
 * before the old array is freed. Per request: no allocation, lock, system
 * call or log.
 *
 * Every round also runs ql_device_progress on each distinct device of the
 * daemons' channels: a software NIC in caller progress mode
 * (docs/progress.md) receives, transmits and fires its timers there.
 *
 * When every channel is idle the dispatcher spins (QL_IDLE_SPIN, the
 * default: lowest latency, burns the core), or after idle_after_ns of
 * idleness backs off to sched_yield() (QL_IDLE_YIELD) or to sleeps of
 * sleep_ns (QL_IDLE_SLEEP) until a request arrives; the first request
 * after the back-off pays the wake-up (see docs/benchmarks.md).
 *
 * ql_daemon_start() still works: it gives the daemon a private dispatcher.
 *
 * A handler that never returns would freeze every daemon of its
 * dispatcher. With call_deadline_ns set, a watchdog thread (started with
 * the dispatcher) checks the call in progress every deadline/4; the
 * dispatcher publishes each call's start and function with two plain
 * stores and takes it back with one atomic exchange (no lock, no system
 * call). A call older than the deadline fails its daemon (-ETIMEDOUT, see
 * ql_daemon_failure), and the other daemons move to a fresh thread on the
 * same core. The stuck thread is abandoned, not killed (that is not safe):
 * it is detached and reniced, never touches another daemon, and exits if
 * the handler ever returns.
 */
#ifndef QLINK_DISPATCHER_H
#define QLINK_DISPATCHER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ql_daemon;
struct ql_dispatcher;

enum ql_idle_policy {
	QL_IDLE_SPIN = 0,  /* poll without pause (default) */
	QL_IDLE_YIELD = 1, /* after idle_after_ns idle: sched_yield() per round */
	QL_IDLE_SLEEP = 2, /* after idle_after_ns idle: sleep sleep_ns per round */
};

#define QL_DISPATCHER_DEFAULT_IDLE_AFTER_NS 100000ull /* 100 us */
#define QL_DISPATCHER_DEFAULT_SLEEP_NS 50000ull	      /* 50 us */
#define QL_DISPATCHER_MAX_SLEEP_NS 100000000ull	      /* 100 ms */
#define QL_DISPATCHER_DEFAULT_MAX_DAEMONS 64

struct ql_dispatcher_config {
	int cpu;		   /* core to pin to; -1: leave unpinned */
	enum ql_idle_policy idle;  /* QL_IDLE_SPIN, _YIELD or _SLEEP */
	uint64_t idle_after_ns;	   /* idle time before backing off (0: 100 us) */
	uint64_t sleep_ns;	   /* QL_IDLE_SLEEP: one nap (0: 50 us; at most
				      100 ms: -EINVAL) */
	uint32_t max_daemons;	   /* daemons attached at once (0: 64) */
	uint64_t call_deadline_ns; /* a handler call longer than this fails its
				      daemon (0: no deadline, no watchdog; at
				      most an hour: -EINVAL) */
};

struct ql_dispatcher_stats {
	uint64_t rounds;      /* polling rounds (one poll of every daemon) */
	uint64_t idle_rounds; /* rounds that found no request */
	uint64_t backoffs;    /* yields or sleeps taken while idle */
	uint64_t requests;    /* requests served, all daemons */
	uint32_t daemons;     /* attached now */
	int cpu;
	int running;
	uint64_t abandoned; /* threads left to a handler past the deadline */
};

int ql_dispatcher_create(const struct ql_dispatcher_config *cfg, struct ql_dispatcher **disp);
/* Stops the thread and detaches every daemon (the daemons stay the
 * caller's). */
void ql_dispatcher_destroy(struct ql_dispatcher *disp);

/* Start the thread; -EALREADY if it runs. */
int ql_dispatcher_start(struct ql_dispatcher *disp);
/* Stop it after the round in progress (every request taken is answered). */
int ql_dispatcher_stop(struct ql_dispatcher *disp);

/*
 * Add a daemon to the round; allowed while running (returns once the
 * dispatcher polls it). -EBUSY if the daemon is attached to a dispatcher
 * (this one or another) or its own thread runs, -ENOSPC when max_daemons
 * are attached.
 */
int ql_dispatcher_attach(struct ql_dispatcher *disp, struct ql_daemon *d);
/*
 * Remove a daemon; allowed while running. Returns once the dispatcher no
 * longer touches the daemon (after its burst in progress, every request
 * taken answered); the daemon can then be destroyed or attached elsewhere.
 * -ENOENT if it is not attached here.
 */
int ql_dispatcher_detach(struct ql_dispatcher *disp, struct ql_daemon *d);

/*
 * Add a poller to the round: every round calls poll(arg) after the
 * daemons' bursts, in the dispatcher's thread (what runs a piece of work
 * in caller progress mode there: the GPU emulation's body, docs/gpu.md);
 * > 0 means it did work (the round is not idle), 0 nothing, < 0 failed
 * (counted as an unhealthy member). The same hot-path rules as a handler.
 * Allowed while running; returns once the thread polls it. -ENOSPC when
 * max_daemons daemons and pollers are attached. Detach returns once the
 * thread no longer calls it; -ENOENT if (poll, arg) is not attached.
 */
typedef int (*ql_dispatcher_poll_fn)(void *arg);
int ql_dispatcher_attach_poll(struct ql_dispatcher *disp, ql_dispatcher_poll_fn poll, void *arg);
int ql_dispatcher_detach_poll(struct ql_dispatcher *disp, ql_dispatcher_poll_fn poll, void *arg);

/* One round in the calling thread (tests, single-threaded programs): the
 * requests served, 0 if none. -EBUSY while the thread runs. Not to be
 * called concurrently with attach or detach (they would not wait for it). */
int ql_dispatcher_poll(struct ql_dispatcher *disp);

/* Snapshot, readable while running. */
void ql_dispatcher_stats(const struct ql_dispatcher *disp, struct ql_dispatcher_stats *s);

/*
 * The name of the handler the calling thread is running, when it is a
 * dispatcher thread inside a handler call; else NULL. Async-signal-safe:
 * for crash reports from a SIGSEGV handler.
 */
const char *ql_dispatcher_current_function(void);

/*
 * Install handlers for SIGSEGV, SIGBUS, SIGFPE and SIGILL (on the
 * dispatcher threads' alternate signal stacks) that write
 * "PROG: handler 'NAME' crashed with SIGSEGV" (or "PROG: crashed with
 * SIGSEGV outside any handler") to stderr, then restore the default action
 * and raise the signal again: the process still dies (a core dump if
 * enabled), but says which function killed it. prog is copied (at most 63
 * bytes).
 */
int ql_dispatcher_crash_report(const char *prog);

/* "spin", "yield", "sleep"; and back (-EINVAL for another name). */
const char *ql_idle_policy_str(enum ql_idle_policy p);
int ql_idle_policy_parse(const char *s, enum ql_idle_policy *p);

#ifdef __cplusplus
}
#endif
#endif
