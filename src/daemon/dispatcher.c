/* SPDX-License-Identifier: MIT */
/*
 * The dispatcher: one thread polling many daemons round robin (see
 * include/qlink/dispatcher.h).
 *
 * The set of daemons (with the pollers of ql_dispatcher_attach_poll and
 * the distinct devices of the daemons' channels, which every round
 * progresses: docs/progress.md) is an immutable array published through
 * `set`. The
 * thread loads it (acquire) once per round and, when it changed, stores the
 * new generation in `ack` (release). Control calls (attach, detach, start,
 * stop, destroy) are serialized by `mutex`, build a new array, publish it
 * and wait until `ack` shows its generation: from then on the thread no
 * longer reads the old array or a detached daemon, and the old array is
 * freed. The round itself takes no lock and makes no system call.
 *
 * With a call deadline, a watchdog thread looks at the call in progress
 * (published by the dispatcher thread in its struct ql__dthread, see
 * daemon_int.h) every deadline/4. A call older than the deadline is
 * claimed: its daemon is failed (-ETIMEDOUT), removed from the set, and a
 * fresh thread instance takes over the set on the same core. The stuck
 * thread cannot be killed safely (it may hold any lock of the handler's
 * libraries); it is detached, reniced, and exits by itself should the
 * handler ever return. Its struct ql__dthread, the failed daemon and its
 * channel are never freed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon_int.h"
#include "providers/common/progress.h"
#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/log.h"

struct dpoll {
	int (*fn)(void *arg);
	void *arg;
};

struct dset {
	uint64_t gen;
	uint32_t n;		/* daemons */
	uint32_t nfn;		/* pollers */
	uint32_t ndev;		/* distinct devices of the daemons' channels */
	struct ql_device **dev; /* [n] (ndev used), in this allocation */
	struct dpoll *fn;	/* [nfn], in this allocation */
	struct ql_daemon *d[];
};

/* A set with room for n daemons and nfn pollers (counts 0). */
static struct dset *dset_new(uint32_t n, uint32_t nfn)
{
	struct dset *s = calloc(1, sizeof(*s) + n * (sizeof(s->d[0]) + sizeof(s->dev[0])) +
					   nfn * sizeof(s->fn[0]));

	if (!s)
		return NULL;
	s->dev = (struct ql_device **)(void *)&s->d[n];
	s->fn = (struct dpoll *)(void *)&s->dev[n];
	return s;
}

/* cur's pollers, less `skip` (fn and arg) if given, plus `add` if given.
 * -ENOENT when skip is not there. */
static int dset_copy_fns(struct dset *next, const struct dset *cur, const struct dpoll *skip,
			 const struct dpoll *add)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < cur->nfn; i++)
		if (!skip || cur->fn[i].fn != skip->fn || cur->fn[i].arg != skip->arg)
			next->fn[k++] = cur->fn[i];
	if (skip && k == cur->nfn)
		return -ENOENT;
	if (add)
		next->fn[k++] = *add;
	next->nfn = k;
	return 0;
}

struct ql_dispatcher {
	struct ql_dispatcher_config cfg;
	pthread_mutex_t mutex;	 /* control calls only, never the round */
	struct ql__dthread *thr; /* the thread instance serving now (atomic
				    loads outside the mutex) */
	bool live;
	_Atomic int stop;
	_Atomic(struct dset *) set;
	_Atomic uint64_t ack; /* generation the thread runs with */
	uint64_t idle_after_ticks;
	struct ql_dispatcher_stats st; /* the thread is the only writer, but
					  for abandoned (the watchdog's) */
	/* the watchdog (call_deadline_ns) */
	pthread_mutex_t wd_mutex; /* its start and stop */
	pthread_t wd;
	bool wd_live;
	_Atomic int wd_stop;
	uint64_t deadline_ticks;
	struct ql__dthread poll_slot; /* ql_dispatcher_poll's: nobody watches it */
};

/* Threads abandoned to a handler, kept (and reachable) for good. */
static pthread_mutex_t dead_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ql__dthread *dead;

/* The dispatcher thread instance running on this thread, if any; read by
 * the crash report in a signal handler (initial-exec: no allocation). */
static __thread struct ql__dthread *self __attribute__((tls_model("initial-exec")));

#define SIGSTACK_BYTES (64 * 1024)

#define BUMP(x) QL_STORE(x, (x) + 1)
#define READ(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static const char *const policy_names[] = { "spin", "yield", "sleep" };

const char *ql_idle_policy_str(enum ql_idle_policy p)
{
	return (unsigned)p < 3 ? policy_names[p] : "?";
}

int ql_idle_policy_parse(const char *s, enum ql_idle_policy *p)
{
	for (int i = 0; s && i < 3; i++) {
		if (!strcmp(s, policy_names[i])) {
			*p = (enum ql_idle_policy)i;
			return 0;
		}
	}
	return -EINVAL;
}

static void nap_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	nanosleep(&ts, NULL);
}

int ql_dispatcher_create(const struct ql_dispatcher_config *cfg, struct ql_dispatcher **out)
{
	struct ql_dispatcher *p;
	struct dset *s;

	if (!cfg || !out)
		return -EINVAL;
	if ((unsigned)cfg->idle > QL_IDLE_SLEEP)
		return ql_error_set(-EINVAL, "dispatcher: unknown idle policy %d", (int)cfg->idle);
	/* a nap the length of an RC peer's whole retry budget (the default
	 * local ACK timeout 14 and retry count 7: ~0.54 s) would fail the
	 * peer's QP while a caller-progress device sleeps (docs/progress.md
	 * §4): at most 100 ms, as qlinkd's dispatcher.sleep_us */
	if (cfg->sleep_ns > QL_DISPATCHER_MAX_SLEEP_NS)
		return ql_error_set(-EINVAL, "dispatcher: sleep_ns %llu is over 100 ms",
				    (unsigned long long)cfg->sleep_ns);
	if (cfg->call_deadline_ns > 3600000000000ull)
		return ql_error_set(-EINVAL,
				    "dispatcher: call_deadline_ns %llu is more than an hour",
				    (unsigned long long)cfg->call_deadline_ns);
	p = calloc(1, sizeof(*p));
	s = dset_new(0, 0);
	if (!p || !s) {
		free(p);
		free(s);
		return -ENOMEM;
	}
	p->cfg = *cfg;
	if (!p->cfg.idle_after_ns)
		p->cfg.idle_after_ns = QL_DISPATCHER_DEFAULT_IDLE_AFTER_NS;
	if (!p->cfg.sleep_ns)
		p->cfg.sleep_ns = QL_DISPATCHER_DEFAULT_SLEEP_NS;
	if (!p->cfg.max_daemons)
		p->cfg.max_daemons = QL_DISPATCHER_DEFAULT_MAX_DAEMONS;
	p->idle_after_ticks = (uint64_t)((double)p->cfg.idle_after_ns * ql_tsc_ghz());
	p->deadline_ticks = (uint64_t)((double)p->cfg.call_deadline_ns * ql_tsc_ghz());
	p->st.cpu = cfg->cpu;
	pthread_mutex_init(&p->mutex, NULL);
	pthread_mutex_init(&p->wd_mutex, NULL);
	atomic_init(&p->set, s);
	atomic_init(&p->ack, 0);
	*out = p;
	return 0;
}

/*
 * One round: a burst from every daemon, a turn of every poller, then the
 * progress of every device (caller progress: the software NIC's receive,
 * transmit and timers run here; 0 and cheap for a device that progresses
 * on its own). Returns the requests served; *healthy counts the daemons
 * and pollers that have not failed, *moved whether a poller or a device did
 * any work (the round was not idle then, even with no request served).
 */
static inline int round_robin(const struct dset *s, struct ql__dthread *w, uint32_t *healthy,
			      bool *moved)
{
	int served = 0;
	uint32_t ok = 0;
	bool work = false;

	for (uint32_t i = 0; i < s->n; i++) {
		int n = ql__daemon_poll(s->d[i], w);

		if (n > 0)
			served += n;
		if (n >= 0)
			ok++;
	}
	for (uint32_t i = 0; i < s->nfn; i++) {
		int n = s->fn[i].fn(s->fn[i].arg);

		if (n > 0)
			work = true;
		if (n >= 0)
			ok++;
	}
	for (uint32_t i = 0; i < s->ndev; i++)
		if (ql_device_progress(s->dev[i]) > 0)
			work = true;
	*healthy = ok;
	*moved = work;
	return served;
}

void ql__dthread_abandoned(void)
{
	/* the watchdog detached this thread and serves its daemons elsewhere */
	pthread_exit(NULL);
}

static void *run(void *arg)
{
	struct ql__dthread *w = arg;
	struct ql_dispatcher *p = w->p;
	const struct dset *s = NULL;
	uint64_t idle_t0 = 0;
	uint32_t idle_n = 0;
	bool backing = false;

	self = w;
	w->tid = gettid();
	if (w->altstack) {
		/* a crash report must run even when a handler overflowed the
		 * stack; a signal stack someone set up already (a sanitizer's
		 * runtime, which also unmaps it when the thread exits) is kept */
		stack_t ss = { .ss_sp = w->altstack, .ss_size = SIGSTACK_BYTES }, cur;

		if (!sigaltstack(NULL, &cur) && !(cur.ss_flags & SS_DISABLE))
			w->altstack_kept = true;
		else
			sigaltstack(&ss, NULL);
	}
	if (p->cfg.cpu >= 0) {
		int ret = ql_cpu_pin(p->cfg.cpu);

		if (ret)
			ql_log_warn("dispatcher", "cannot pin the dispatcher to cpu %d: %s",
				    p->cfg.cpu, ql_strerror(ret));
	}
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		const struct dset *cur = atomic_load_explicit(&p->set, memory_order_acquire);
		uint32_t healthy;
		bool moved;
		int served;

		if (cur != s) {
			s = cur;
			atomic_store_explicit(&p->ack, s->gen, memory_order_release);
		}
		served = round_robin(s, w, &healthy, &moved);
		BUMP(p->st.rounds);
		if (served || moved) {
			if (served)
				QL_STORE(p->st.requests, p->st.requests + (uint64_t)served);
			idle_n = 0;
			backing = false;
			continue;
		}
		BUMP(p->st.idle_rounds);
		if (!healthy) {
			/* nothing attached, or every channel failed (peers gone):
			 * nothing will arrive, stop burning the core */
			nap_ns(1000000);
			continue;
		}
		if (p->cfg.idle == QL_IDLE_SPIN)
			continue;
		if (!backing) {
			/* read the clock once in 64 idle rounds only */
			if (idle_n++ == 0)
				idle_t0 = ql_tsc();
			if (idle_n & 63 || ql_tsc() - idle_t0 < p->idle_after_ticks)
				continue;
			backing = true;
		}
		BUMP(p->st.backoffs);
		if (p->cfg.idle == QL_IDLE_YIELD)
			sched_yield();
		else
			nap_ns(p->cfg.sleep_ns);
	}
	if (w->altstack && !w->altstack_kept) {
		stack_t ss = { .ss_flags = SS_DISABLE };

		sigaltstack(&ss, NULL);
	}
	__atomic_store_n(&w->exited, 1, __ATOMIC_RELEASE);
	return NULL;
}

static bool abandoned(const struct ql__dthread *w)
{
	return w && __atomic_load_n(&w->call_t0, __ATOMIC_ACQUIRE) == QL__CALL_ABANDONED;
}

/* A new thread instance serving p's set. Called with the mutex held. */
static int thread_start(struct ql_dispatcher *p)
{
	struct ql__dthread *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	w->p = p;
	w->altstack = malloc(SIGSTACK_BYTES);
	ret = -pthread_create(&w->thread, NULL, run, w);
	if (ret) {
		free(w->altstack);
		free(w);
		return ret;
	}
	/* a polling thread: what progress=auto weighs (docs/progress.md); an
	 * abandoned one keeps spinning and keeps its count */
	ql__progress_threads_add(1);
	__atomic_store_n(&p->thr, w, __ATOMIC_RELEASE);
	return 0;
}

/* Wait for the thread to leave its loop (p->stop set), join and free it;
 * a thread abandoned meanwhile is left to the watchdog. Mutex held. */
static void thread_end(struct ql_dispatcher *p)
{
	struct ql__dthread *w = p->thr;

	while (!__atomic_load_n(&w->exited, __ATOMIC_ACQUIRE)) {
		if (abandoned(w)) {
			__atomic_store_n(&p->thr, NULL, __ATOMIC_RELEASE);
			return;
		}
		nap_ns(200000);
	}
	pthread_join(w->thread, NULL);
	ql__progress_threads_add(-1);
	free(w->altstack);
	free(w);
	__atomic_store_n(&p->thr, NULL, __ATOMIC_RELEASE);
}

static void publish(struct ql_dispatcher *p, struct dset *next);

/* The watchdog claimed the call in progress on w: fail its daemon, keep w
 * for good, and serve the other daemons on a fresh thread. */
static void rescue(struct ql_dispatcher *p, struct ql__dthread *w)
{
	struct ql_daemon *d = __atomic_load_n(&w->call_daemon, __ATOMIC_ACQUIRE);
	const char *fn = __atomic_load_n(&w->call_name, __ATOMIC_RELAXED);
	struct dset *cur, *next;
	uint32_t k = 0;

	pthread_detach(w->thread);
	/* it may spin for ever: let the replacement have the core */
	setpriority(PRIO_PROCESS, (id_t)w->tid, 19);
	ql__daemon_fail(d, fn, -ETIMEDOUT);
	__atomic_store_n(&p->st.abandoned, p->st.abandoned + 1, __ATOMIC_RELAXED);
	ql_log_error("dispatcher",
		     "handler '%s' exceeded its deadline of %llu us: its session failed, "
		     "thread %d abandoned, the other sessions of cpu %d move to a new thread",
		     fn ? fn : "?", (unsigned long long)(p->cfg.call_deadline_ns / 1000),
		     (int)w->tid, p->cfg.cpu);
	pthread_mutex_lock(&dead_lock);
	w->next = dead;
	dead = w;
	pthread_mutex_unlock(&dead_lock);

	pthread_mutex_lock(&p->mutex);
	cur = atomic_load_explicit(&p->set, memory_order_relaxed);
	next = dset_new(cur->n, cur->nfn);
	if (next) {
		for (uint32_t i = 0; i < cur->n; i++)
			if (cur->d[i] != d)
				next->d[k++] = cur->d[i];
		next->n = k;
		dset_copy_fns(next, cur, NULL, NULL);
		publish(p, next); /* w is abandoned: no wait */
		QL_STORE(p->st.daemons, k);
	}
	pthread_mutex_lock(&d->lock);
	if (d->disp == p)
		d->disp = NULL;
	pthread_mutex_unlock(&d->lock);
	if (p->thr == w) {
		__atomic_store_n(&p->thr, NULL, __ATOMIC_RELEASE);
		if (p->live && thread_start(p)) {
			ql_log_error("dispatcher", "cpu %d: no replacement thread", p->cfg.cpu);
			p->live = false;
			QL_STORE(p->st.running, 0);
		}
	}
	pthread_mutex_unlock(&p->mutex);
}

static void *watchdog(void *arg)
{
	struct ql_dispatcher *p = arg;
	uint64_t period = p->cfg.call_deadline_ns / 4;

	if (period < 100000)
		period = 100000;
	if (period > 20000000)
		period = 20000000;
	while (!atomic_load(&p->wd_stop)) {
		struct ql__dthread *w;
		uint64_t t0, now;

		nap_ns(period);
		w = __atomic_load_n(&p->thr, __ATOMIC_ACQUIRE);
		if (!w)
			continue;
		t0 = __atomic_load_n(&w->call_t0, __ATOMIC_ACQUIRE);
		now = ql_tsc();
		if (!t0 || t0 == QL__CALL_ABANDONED || now < t0 || now - t0 <= p->deadline_ticks)
			continue;
		if (__atomic_compare_exchange_n(&w->call_t0, &t0, QL__CALL_ABANDONED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			rescue(p, w);
	}
	return NULL;
}

static int watchdog_start(struct ql_dispatcher *p)
{
	int ret = 0;

	if (!p->cfg.call_deadline_ns)
		return 0;
	pthread_mutex_lock(&p->wd_mutex);
	if (!p->wd_live) {
		atomic_store(&p->wd_stop, 0);
		ret = -pthread_create(&p->wd, NULL, watchdog, p);
		p->wd_live = !ret;
	}
	pthread_mutex_unlock(&p->wd_mutex);
	return ret;
}

static void watchdog_stop(struct ql_dispatcher *p)
{
	pthread_mutex_lock(&p->wd_mutex);
	if (p->wd_live) {
		atomic_store(&p->wd_stop, 1);
		pthread_join(p->wd, NULL);
		p->wd_live = false;
	}
	pthread_mutex_unlock(&p->wd_mutex);
}

const char *ql_dispatcher_current_function(void)
{
	struct ql__dthread *w = self;

	if (!w || !__atomic_load_n(&w->call_t0, __ATOMIC_RELAXED))
		return NULL;
	return __atomic_load_n(&w->call_name, __ATOMIC_RELAXED);
}

static void set_running(const struct dset *s, int running)
{
	for (uint32_t i = 0; i < s->n; i++)
		QL_STORE(s->d[i]->st.running, running);
}

/* Publish `next` and return once the thread runs with it; frees the old
 * set. Called with the mutex held. */
static void publish(struct ql_dispatcher *p, struct dset *next)
{
	struct dset *old = atomic_load_explicit(&p->set, memory_order_relaxed);

	/* the devices the round progresses: each daemon's channel's, once */
	next->ndev = 0;
	for (uint32_t i = 0; i < next->n; i++) {
		struct ql_device *dev = ql_channel_device(next->d[i]->ch);
		uint32_t j = 0;

		while (j < next->ndev && next->dev[j] != dev)
			j++;
		if (dev && j == next->ndev)
			next->dev[next->ndev++] = dev;
	}
	next->gen = old->gen + 1;
	atomic_store_explicit(&p->set, next, memory_order_release);
	if (p->live && p->thr) {
		/* a thread stuck in a handler never acknowledges: once the
		 * watchdog abandoned it, it never reads the set again */
		while (atomic_load_explicit(&p->ack, memory_order_acquire) != next->gen &&
		       !abandoned(p->thr))
			nap_ns(20000);
	} else {
		atomic_store_explicit(&p->ack, next->gen, memory_order_relaxed);
	}
	free(old);
}

int ql_dispatcher_attach(struct ql_dispatcher *p, struct ql_daemon *d)
{
	struct dset *cur, *next;
	int ret = 0;

	if (!p || !d)
		return -EINVAL;
	pthread_mutex_lock(&p->mutex);
	cur = atomic_load_explicit(&p->set, memory_order_relaxed);
	if (cur->n >= p->cfg.max_daemons) {
		ret = ql_error_set(-ENOSPC, "dispatcher: %u daemons attached already",
				   p->cfg.max_daemons);
		goto out;
	}
	next = dset_new(cur->n + 1, cur->nfn);
	if (!next) {
		ret = -ENOMEM;
		goto out;
	}
	dset_copy_fns(next, cur, NULL, NULL);
	pthread_mutex_lock(&d->lock);
	if (__atomic_load_n(&d->failed, __ATOMIC_ACQUIRE)) {
		pthread_mutex_unlock(&d->lock);
		free(next);
		ret = ql_error_set(-EIO,
				   "dispatcher: the daemon failed (handler '%s' overran "
				   "its deadline)",
				   d->failed_fn);
		goto out;
	}
	if (d->disp) {
		pthread_mutex_unlock(&d->lock);
		free(next);
		ret = ql_error_set(-EBUSY, "dispatcher: the daemon is served by a dispatcher");
		goto out;
	}
	d->disp = p;
	pthread_mutex_unlock(&d->lock);
	memcpy(next->d, cur->d, cur->n * sizeof(next->d[0]));
	next->d[cur->n] = d;
	next->n = cur->n + 1;
	atomic_store(&d->stop, 0);
	publish(p, next);
	QL_STORE(d->st.running, p->live ? 1 : 0);
	QL_STORE(p->st.daemons, next->n);
out:
	pthread_mutex_unlock(&p->mutex);
	return ret;
}

int ql_dispatcher_detach(struct ql_dispatcher *p, struct ql_daemon *d)
{
	struct dset *cur, *next;
	uint32_t k = 0;
	int ret = 0;

	if (!p || !d)
		return -EINVAL;
	pthread_mutex_lock(&p->mutex);
	cur = atomic_load_explicit(&p->set, memory_order_relaxed);
	next = dset_new(cur->n, cur->nfn);
	if (!next) {
		ret = -ENOMEM;
		goto out;
	}
	dset_copy_fns(next, cur, NULL, NULL);
	for (uint32_t i = 0; i < cur->n; i++)
		if (cur->d[i] != d)
			next->d[k++] = cur->d[i];
	if (k == cur->n) {
		free(next);
		ret = -ENOENT;
		goto out;
	}
	next->n = k;
	/* a burst waiting for response buffers gives up (and counts the
	 * requests it cannot answer) rather than hold the detach forever */
	atomic_store(&d->stop, 1);
	publish(p, next);
	atomic_store(&d->stop, 0);
	QL_STORE(d->st.running, 0);
	QL_STORE(p->st.daemons, next->n);
	pthread_mutex_lock(&d->lock);
	d->disp = NULL;
	pthread_mutex_unlock(&d->lock);
out:
	pthread_mutex_unlock(&p->mutex);
	/* the daemon's channel is the caller's alone now: the last responses'
	 * completions may still be on their way (a peer that got its answer
	 * can stop the session first), so count them, bounded (20 ms), before
	 * anyone reads the session's counters */
	if (!ret)
		ql_channel_drain_sends(d->ch, 20000000);
	return ret;
}

/* Publish cur's daemons with cur's pollers less skip, plus add. */
static int change_fns(struct ql_dispatcher *p, const struct dpoll *skip, const struct dpoll *add)
{
	struct dset *cur, *next;
	int ret;

	pthread_mutex_lock(&p->mutex);
	cur = atomic_load_explicit(&p->set, memory_order_relaxed);
	if (add && cur->n + cur->nfn >= p->cfg.max_daemons) {
		ret = ql_error_set(-ENOSPC, "dispatcher: %u daemons and pollers attached already",
				   p->cfg.max_daemons);
		goto out;
	}
	next = dset_new(cur->n, cur->nfn + 1);
	if (!next) {
		ret = -ENOMEM;
		goto out;
	}
	ret = dset_copy_fns(next, cur, skip, add);
	if (ret) {
		free(next);
		goto out;
	}
	memcpy(next->d, cur->d, cur->n * sizeof(next->d[0]));
	next->n = cur->n;
	publish(p, next);
out:
	pthread_mutex_unlock(&p->mutex);
	return ret;
}

int ql_dispatcher_attach_poll(struct ql_dispatcher *p, ql_dispatcher_poll_fn poll, void *arg)
{
	const struct dpoll add = { poll, arg };

	if (!p || !poll)
		return -EINVAL;
	return change_fns(p, NULL, &add);
}

int ql_dispatcher_detach_poll(struct ql_dispatcher *p, ql_dispatcher_poll_fn poll, void *arg)
{
	const struct dpoll skip = { poll, arg };

	if (!p || !poll)
		return -EINVAL;
	return change_fns(p, &skip, NULL);
}

int ql_dispatcher_start(struct ql_dispatcher *p)
{
	int ret;

	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&p->mutex);
	if (p->live) {
		pthread_mutex_unlock(&p->mutex);
		return -EALREADY;
	}
	atomic_store(&p->stop, 0);
	ret = thread_start(p);
	if (!ret) {
		p->live = true;
		QL_STORE(p->st.running, 1);
		set_running(atomic_load(&p->set), 1);
	}
	pthread_mutex_unlock(&p->mutex);
	if (!ret && watchdog_start(p)) {
		ql_dispatcher_stop(p);
		return ql_error_set(-EAGAIN, "dispatcher: cannot start the watchdog thread");
	}
	return ret;
}

int ql_dispatcher_stop(struct ql_dispatcher *p)
{
	struct dset *s;

	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&p->mutex);
	if (!p->live) {
		pthread_mutex_unlock(&p->mutex);
		watchdog_stop(p);
		return 0;
	}
	s = atomic_load(&p->set);
	for (uint32_t i = 0; i < s->n; i++)
		atomic_store(&s->d[i]->stop, 1);
	atomic_store(&p->stop, 1);
	if (p->thr)
		thread_end(p);
	p->live = false;
	for (uint32_t i = 0; i < s->n; i++)
		atomic_store(&s->d[i]->stop, 0);
	set_running(s, 0);
	QL_STORE(p->st.running, 0);
	pthread_mutex_unlock(&p->mutex);
	/* after the thread: the watchdog may have to claim it first */
	watchdog_stop(p);
	return 0;
}

void ql_dispatcher_destroy(struct ql_dispatcher *p)
{
	struct dset *s;

	if (!p)
		return;
	ql_dispatcher_stop(p);
	s = atomic_load(&p->set);
	for (uint32_t i = 0; i < s->n; i++) {
		struct ql_daemon *d = s->d[i];

		QL_STORE(d->st.running, 0);
		pthread_mutex_lock(&d->lock);
		d->disp = NULL;
		pthread_mutex_unlock(&d->lock);
	}
	free(s);
	pthread_mutex_destroy(&p->mutex);
	pthread_mutex_destroy(&p->wd_mutex);
	free(p);
}

int ql_dispatcher_poll(struct ql_dispatcher *p)
{
	uint32_t healthy;
	bool moved;
	int served;

	if (!p)
		return -EINVAL;
	if (p->live)
		return -EBUSY;
	served = round_robin(atomic_load_explicit(&p->set, memory_order_relaxed), &p->poll_slot,
			     &healthy, &moved);
	BUMP(p->st.rounds);
	if (served)
		QL_STORE(p->st.requests, p->st.requests + (uint64_t)served);
	else
		BUMP(p->st.idle_rounds);
	return served;
}

void ql_dispatcher_stats(const struct ql_dispatcher *p, struct ql_dispatcher_stats *s)
{
	s->rounds = READ(p->st.rounds);
	s->idle_rounds = READ(p->st.idle_rounds);
	s->backoffs = READ(p->st.backoffs);
	s->requests = READ(p->st.requests);
	s->daemons = READ(p->st.daemons);
	s->cpu = p->cfg.cpu;
	s->running = READ(p->st.running);
	s->abandoned = READ(p->st.abandoned);
}

/* ---- crash report ------------------------------------------------------------ */

static char crash_prog[64] = "qlink";

static void put(const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t w = write(STDERR_FILENO, s, n);

		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static const char *crash_signame(int sig)
{
	switch (sig) {
	case SIGSEGV:
		return "SIGSEGV";
	case SIGBUS:
		return "SIGBUS";
	case SIGFPE:
		return "SIGFPE";
	case SIGILL:
		return "SIGILL";
	default:
		return "a signal";
	}
}

/* Only async-signal-safe calls: strlen, write, sigaction, raise. */
static void on_crash(int sig, siginfo_t *si, void *uc)
{
	const char *fn = ql_dispatcher_current_function();
	struct sigaction dfl;

	(void)si;
	(void)uc;
	put(crash_prog);
	if (fn) {
		put(": handler '");
		put(fn);
		put("' crashed with ");
	} else {
		put(": crashed with ");
	}
	put(crash_signame(sig));
	put(fn ? "\n" : " outside any handler\n");
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	raise(sig); /* pending until we return; a fault also recurs */
}

int ql_dispatcher_crash_report(const char *prog)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL };
	struct sigaction sa;

	if (prog) {
		strncpy(crash_prog, prog, sizeof(crash_prog) - 1);
		crash_prog[sizeof(crash_prog) - 1] = '\0';
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_crash;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], &sa, NULL))
			return ql_error_set(-errno, "crash report: sigaction: %s", strerror(errno));
	return 0;
}
