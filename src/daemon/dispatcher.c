/*
 * The dispatcher: one thread polling many daemons round robin (see
 * include/qlink/dispatcher.h).
 *
 * The set of daemons is an immutable array published through `set`. The
 * thread loads it (acquire) once per round and, when it changed, stores the
 * new generation in `ack` (release). Control calls (attach, detach, start,
 * stop, destroy) are serialized by `mutex`, build a new array, publish it
 * and wait until `ack` shows its generation: from then on the thread no
 * longer reads the old array or a detached daemon, and the old array is
 * freed. The round itself takes no lock and makes no system call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/daemon_int.h"
#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/log.h"

struct dset {
	uint64_t gen;
	uint32_t n;
	struct ql_daemon *d[];
};

struct ql_dispatcher {
	struct ql_dispatcher_config cfg;
	pthread_mutex_t mutex; /* control calls only, never the round */
	pthread_t thread;
	bool live;
	_Atomic int stop;
	_Atomic(struct dset *) set;
	_Atomic uint64_t ack; /* generation the thread runs with */
	uint64_t idle_after_ticks;
	struct ql_dispatcher_stats st; /* the thread is the only writer */
};

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
	if (cfg->sleep_ns >= 1000000000ull)
		return ql_error_set(-EINVAL, "dispatcher: sleep_ns %llu is a second or more",
				    (unsigned long long)cfg->sleep_ns);
	p = calloc(1, sizeof(*p));
	s = calloc(1, sizeof(*s));
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
	p->st.cpu = cfg->cpu;
	pthread_mutex_init(&p->mutex, NULL);
	atomic_init(&p->set, s);
	atomic_init(&p->ack, 0);
	*out = p;
	return 0;
}

/*
 * One round: a burst from every daemon. Returns the requests served; *healthy
 * counts the daemons whose channel has not failed.
 */
static inline int round_robin(const struct dset *s, uint32_t *healthy)
{
	int served = 0;
	uint32_t ok = 0;

	for (uint32_t i = 0; i < s->n; i++) {
		int n = ql_daemon_poll(s->d[i]);

		if (n > 0)
			served += n;
		if (n >= 0)
			ok++;
	}
	*healthy = ok;
	return served;
}

static void *run(void *arg)
{
	struct ql_dispatcher *p = arg;
	const struct dset *s = NULL;
	uint64_t idle_t0 = 0;
	uint32_t idle_n = 0;
	bool backing = false;

	if (p->cfg.cpu >= 0) {
		int ret = ql_cpu_pin(p->cfg.cpu);

		if (ret)
			ql_log_warn("dispatcher", "cannot pin the dispatcher to cpu %d: %s",
				    p->cfg.cpu, ql_strerror(ret));
	}
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		const struct dset *cur = atomic_load_explicit(&p->set, memory_order_acquire);
		uint32_t healthy;
		int served;

		if (cur != s) {
			s = cur;
			atomic_store_explicit(&p->ack, s->gen, memory_order_release);
		}
		served = round_robin(s, &healthy);
		BUMP(p->st.rounds);
		if (served) {
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
	return NULL;
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

	next->gen = old->gen + 1;
	atomic_store_explicit(&p->set, next, memory_order_release);
	if (p->live) {
		while (atomic_load_explicit(&p->ack, memory_order_acquire) != next->gen)
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
	next = malloc(sizeof(*next) + (cur->n + 1) * sizeof(next->d[0]));
	if (!next) {
		ret = -ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&d->lock);
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
	next = malloc(sizeof(*next) + cur->n * sizeof(next->d[0]));
	if (!next) {
		ret = -ENOMEM;
		goto out;
	}
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
	return ret;
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
	ret = -pthread_create(&p->thread, NULL, run, p);
	if (!ret) {
		p->live = true;
		QL_STORE(p->st.running, 1);
		set_running(atomic_load(&p->set), 1);
	}
	pthread_mutex_unlock(&p->mutex);
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
		return 0;
	}
	s = atomic_load(&p->set);
	for (uint32_t i = 0; i < s->n; i++)
		atomic_store(&s->d[i]->stop, 1);
	atomic_store(&p->stop, 1);
	pthread_join(p->thread, NULL);
	p->live = false;
	for (uint32_t i = 0; i < s->n; i++)
		atomic_store(&s->d[i]->stop, 0);
	set_running(s, 0);
	QL_STORE(p->st.running, 0);
	pthread_mutex_unlock(&p->mutex);
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
	free(p);
}

int ql_dispatcher_poll(struct ql_dispatcher *p)
{
	uint32_t healthy;
	int served;

	if (!p)
		return -EINVAL;
	if (p->live)
		return -EBUSY;
	served = round_robin(atomic_load_explicit(&p->set, memory_order_relaxed), &healthy);
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
}
