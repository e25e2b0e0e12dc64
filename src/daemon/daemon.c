/* SPDX-License-Identifier: MIT */
/*
 * The RPC daemon: one channel, its function table and statistics (see
 * include/qlink/daemon.h). The threads that poll it are dispatchers
 * (dispatcher.c).
 *
 * The dispatcher is the only writer of the statistics; it updates each
 * counter with a relaxed atomic store so a reader in another thread sees
 * whole values without the dispatcher paying for atomic read-modify-write.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_int.h"
#include "daemon/source.h"
#include "qlink/clock.h"
#include "qlink/error.h"
#include "rpc/guarded.h"

#define BUMP(x) __atomic_store_n(&(x), (x) + 1, __ATOMIC_RELAXED)
#define ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define READ(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

int ql_daemon_create(const struct ql_daemon_config *cfg, struct ql_channel *ch,
		     struct ql_daemon **out)
{
	struct ql_daemon *d;
	uint32_t cap;
	int ret;

	if (!cfg || !ch || !out)
		return -EINVAL;
	if (cfg->burst > QL_DAEMON_MAX_BURST)
		return ql_error_set(-EINVAL, "daemon: burst %u above %d", cfg->burst,
				    QL_DAEMON_MAX_BURST);
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->cfg = *cfg;
	if (!d->cfg.burst)
		d->cfg.burst = QL_DAEMON_MAX_BURST;
	cap = d->cfg.max_functions ? d->cfg.max_functions : 64;
	d->cfg.max_functions = cap;
	d->ch = ch;
	ret = ql_rpc_table_create(cap, &d->table);
	if (ret)
		goto err;
	d->fn_calls = calloc(cap, sizeof(*d->fn_calls));
	d->fn_errors = calloc(cap, sizeof(*d->fn_errors));
	d->fn_overruns = calloc(cap, sizeof(*d->fn_overruns));
	if (!d->fn_calls || !d->fn_errors || !d->fn_overruns) {
		ret = -ENOMEM;
		goto err;
	}
	ql_hist_init(&d->hist);
	d->tick_ns_q32 = (uint64_t)((1ull << 32) / ql_tsc_ghz());
	pthread_mutex_init(&d->lock, NULL);
	*out = d;
	return 0;
err:
	if (d->table)
		ql_rpc_table_destroy(d->table);
	free(d->fn_calls);
	free(d->fn_errors);
	free(d->fn_overruns);
	free(d);
	return ret;
}

/*
 * Daemons whose handler was abandoned (deadline): the abandoned thread may
 * still return from the handler and read the function table, and write the
 * response buffer, so neither is ever freed. Kept reachable here.
 */
static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ql_daemon *quarantined;

void ql_daemon_destroy(struct ql_daemon *d)
{
	if (!d)
		return;
	ql_daemon_stop(d);
	ql_dispatcher_destroy(d->own);
	d->own = NULL;
	if (__atomic_load_n(&d->failed, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&quarantine_lock);
		d->next_quarantined = quarantined;
		quarantined = d;
		pthread_mutex_unlock(&quarantine_lock);
		return;
	}
	ql_rpc_table_destroy(d->table);
	pthread_mutex_destroy(&d->lock);
	free(d->fn_calls);
	free(d->fn_errors);
	free(d->fn_overruns);
	free(d);
}

int ql_daemon_register(struct ql_daemon *d, const struct ql_rpc_function *fn)
{
	int ret;

	if (!d || !fn)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	if (d->disp) {
		pthread_mutex_unlock(&d->lock);
		return ql_error_set(-EBUSY, "daemon: register functions while stopped");
	}
	ret = ql_rpc_table_add(d->table, fn);
	pthread_mutex_unlock(&d->lock);
	return ret < 0 ? ret : 0;
}

static void account(struct ql_daemon *d, const struct ql_rpc_dispatch_info *info)
{
	switch (info->kind) {
	case QL_RPC_ERR_NONE:
		BUMP(d->st.ok);
		break;
	case QL_RPC_ERR_HANDLER:
		BUMP(d->st.handler_error);
		break;
	case QL_RPC_ERR_SHORT:
		BUMP(d->st.err_short);
		break;
	case QL_RPC_ERR_BAD_MAGIC:
		BUMP(d->st.err_bad_magic);
		break;
	case QL_RPC_ERR_BAD_LENGTH:
		BUMP(d->st.err_bad_length);
		break;
	case QL_RPC_ERR_UNKNOWN_FUNCTION:
		BUMP(d->st.err_unknown_function);
		break;
	case QL_RPC_ERR_ARGS_MISMATCH:
		BUMP(d->st.err_args);
		break;
	case QL_RPC_ERR_RESULT_OVERFLOW:
		BUMP(d->st.err_result_overflow);
		break;
	default:
		BUMP(d->st.err_internal);
		break;
	}
	if (info->index >= 0 && (uint32_t)info->index < d->cfg.max_functions) {
		BUMP(d->fn_calls[info->index]);
		if (info->kind != QL_RPC_ERR_NONE)
			BUMP(d->fn_errors[info->index]);
	}
}

/* Refused before the handler ran: what QL_BAD_REQUEST_DROP leaves
 * unanswered (a handler's own error status is always answered). */
static inline bool refused(enum ql_rpc_err_kind k)
{
	return k == QL_RPC_ERR_SHORT || k == QL_RPC_ERR_BAD_MAGIC || k == QL_RPC_ERR_BAD_LENGTH ||
	       k == QL_RPC_ERR_UNKNOWN_FUNCTION || k == QL_RPC_ERR_ARGS_MISMATCH;
}

/* Hand the built responses to the channel; unsent ones go back. */
static void flush(struct ql_daemon *d, struct ql_buffer **tx, int m)
{
	int sent = ql_channel_send_burst(d->ch, tx, m);

	if (sent < 0) {
		__atomic_store_n(&d->st.channel_error, sent, __ATOMIC_RELAXED);
		sent = 0;
	}
	ADD(d->st.sent, (uint64_t)sent);
	if (sent < m) {
		ADD(d->st.send_failed, (uint64_t)(m - sent));
		for (int j = sent; j < m; j++)
			ql_channel_release_buffer(d->ch, tx[j]);
	}
}

void ql__daemon_fail(struct ql_daemon *d, const char *fn, int err)
{
	size_t i = 0;

	/* the dispatcher never writes these: the watchdog is their only writer */
	for (; fn && fn[i] && i < sizeof(d->failed_fn) - 1; i++)
		d->failed_fn[i] = fn[i];
	d->failed_fn[i] = '\0';
	BUMP(d->st.err_deadline);
	__atomic_store_n(&d->failed, err, __ATOMIC_RELEASE);
	QL_STORE(d->st.running, 0);
}

int ql_daemon_failure(const struct ql_daemon *d, char *fn, size_t len)
{
	int err;

	if (!d)
		return -EINVAL;
	err = __atomic_load_n(&d->failed, __ATOMIC_ACQUIRE);
	if (fn && len) {
		fn[0] = '\0';
		if (err)
			snprintf(fn, len, "%s", d->failed_fn);
	}
	return err;
}

int ql_daemon_poll(struct ql_daemon *d)
{
	struct ql_device *dev = ql_channel_device(d->ch);

	/* a caller-progress device's NIC runs here too (docs/progress.md) */
	if (dev)
		ql_device_progress(dev);
	if (__atomic_load_n(&d->failed, __ATOMIC_ACQUIRE))
		return d->failed;
	return ql__daemon_poll(d, &d->solo);
}

/* The request the calling thread's handler is serving (two stores per
 * request; read by ql__daemon_request_source). */
static __thread struct {
	struct ql_channel *ch;
	const struct ql_buffer *rx;
} ql__cur_req;

size_t ql__daemon_request_source(uint8_t *key, size_t cap)
{
	const struct ql__channel_ops *ops;

	if (!ql__cur_req.rx || !ql__cur_req.ch)
		return 0;
	ops = ((const struct ql__channel_head *)(const void *)ql__cur_req.ch)->ops;
	return ops->source ? ops->source(ql__cur_req.ch, ql__cur_req.rx, key, cap) : 0;
}

int ql__daemon_poll(struct ql_daemon *d, struct ql__dthread *w)
{
	struct ql_buffer *rx[QL_DAEMON_MAX_BURST], *tx[QL_DAEMON_MAX_BURST];
	int n = ql_channel_receive_burst(d->ch, rx, (int)d->cfg.burst);
	int m = 0;

	if (n <= 0) {
		if (n < 0 && !d->st.channel_error)
			__atomic_store_n(&d->st.channel_error, n, __ATOMIC_RELAXED);
		return n;
	}
	ADD(d->st.requests, (uint64_t)n);
	BUMP(d->st.bursts);
	__atomic_store_n(&w->call_daemon, d, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++) {
		struct ql_rpc_dispatch_info info;
		struct ql_buffer *t;
		uint64_t t0, t1;
		size_t rlen = 0, cap;
		bool overrun;

		while (!(t = ql_channel_acquire_buffer(d->ch))) {
			int err;

			/* Every response buffer is taken. Send the ones built so
			 * far first: the completions that free buffers may wait
			 * on them (the channel signals one SEND in several). */
			if (m) {
				flush(d, tx, m);
				m = 0;
				continue;
			}
			err = ql_channel_poll_errors(d->ch);
			if (err || atomic_load_explicit(&d->stop, memory_order_relaxed)) {
				/* no way to answer the rest of the burst */
				if (err)
					__atomic_store_n(&d->st.channel_error, err,
							 __ATOMIC_RELAXED);
				ADD(d->st.send_failed, (uint64_t)(n - i));
				for (int j = i; j < n; j++)
					ql_channel_release_buffer(d->ch, rx[j]);
				return n;
			}
		}
		/* the response answers this request: a channel that addresses
		 * responses per request (UDP) finds the requester by it */
		t->tag = rx[i]->tag;
		/* the canary goes in the pool's slack past the buffer's
		 * capacity (QL_POOL_SLACK): the handler has all of it */
		_Static_assert(QL_POOL_SLACK >= QL__RPC_CANARY_SIZE, "no room for the canary");
		cap = ql_buffer_tailroom(t);
		/* a channel that limits the reply (UDP: never longer than the
		 * request datagram) limits what the handler may write, so it
		 * fails with its own "does not fit" status before acting */
		if (rx[i]->reply_max && cap > rx[i]->reply_max)
			cap = rx[i]->reply_max;
		ql__cur_req.ch = d->ch;
		ql__cur_req.rx = rx[i];
		t0 = ql_tsc();
		/* the call in progress, for the watchdog: two stores and one
		 * exchange per request, no lock, no system call */
		__atomic_store_n(&w->call_t0, t0 | 1, __ATOMIC_RELEASE);
		ql__rpc_dispatch_guarded(d->table, ql_buffer_data(rx[i]), rx[i]->len,
					 ql_buffer_data(t), cap, &rlen, &info, &w->call_name,
					 &overrun);
		if (__builtin_expect(__atomic_exchange_n(&w->call_t0, 0, __ATOMIC_ACQ_REL) ==
					     QL__CALL_ABANDONED,
				     0))
			ql__dthread_abandoned();
		t1 = ql_tsc();
		ql__cur_req.rx = NULL;
		ql_hist_record(&d->hist, ((t1 - t0) * d->tick_ns_q32) >> 32);
		if (__builtin_expect(overrun, 0))
			BUMP(d->st.err_result_overrun);
		else
			account(d, &info);
		if (overrun && info.index >= 0 && (uint32_t)info.index < d->cfg.max_functions) {
			BUMP(d->fn_calls[info.index]);
			BUMP(d->fn_errors[info.index]);
			BUMP(d->fn_overruns[info.index]);
		}
		ql_channel_release_buffer(d->ch, rx[i]);
		if (d->cfg.bad_requests == QL_BAD_REQUEST_DROP && refused(info.kind)) {
			BUMP(d->st.dropped);
			ql_channel_release_buffer(d->ch, t);
			continue;
		}
		t->len = (uint32_t)rlen;
		tx[m++] = t;
	}
	if (m)
		flush(d, tx, m);
	return n;
}

int ql_daemon_start(struct ql_daemon *d)
{
	struct ql_dispatcher_config dc = { .cpu = d ? d->cfg.cpu : -1 };
	struct ql_dispatcher *own;
	int ret;

	if (!d)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	if (d->disp) {
		pthread_mutex_unlock(&d->lock);
		return -EALREADY;
	}
	if (!d->own) {
		ret = ql_dispatcher_create(&dc, &d->own);
		if (ret) {
			pthread_mutex_unlock(&d->lock);
			return ret;
		}
	}
	own = d->own;
	pthread_mutex_unlock(&d->lock);
	ret = ql_dispatcher_attach(own, d);
	if (ret)
		return ret == -EBUSY ? -EALREADY : ret;
	ret = ql_dispatcher_start(own);
	if (ret && ret != -EALREADY) {
		ql_dispatcher_detach(own, d);
		return ret;
	}
	return 0;
}

int ql_daemon_stop(struct ql_daemon *d)
{
	struct ql_dispatcher *disp;

	if (!d)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	disp = d->disp;
	pthread_mutex_unlock(&d->lock);
	if (!disp)
		return 0;
	if (disp == d->own)
		ql_dispatcher_stop(disp);
	ql_dispatcher_detach(disp, d);
	return 0;
}

void ql_daemon_stats(const struct ql_daemon *d, struct ql_daemon_stats *s)
{
	s->requests = READ(d->st.requests);
	{
		struct ql_channel_send_stats cs;

		s->sent = READ(d->st.sent);
		if (!ql_channel_send_stats(d->ch, &cs)) {
			s->responses = cs.completed;
			s->dropped_rnr = cs.dropped_rnr;
			s->dropped_peer = cs.dropped_peer;
		} else {
			s->responses = s->sent; /* accepted is delivered */
			s->dropped_rnr = s->dropped_peer = 0;
		}
	}
	s->ok = READ(d->st.ok);
	s->handler_error = READ(d->st.handler_error);
	s->err_short = READ(d->st.err_short);
	s->err_bad_magic = READ(d->st.err_bad_magic);
	s->err_bad_length = READ(d->st.err_bad_length);
	s->err_unknown_function = READ(d->st.err_unknown_function);
	s->err_args = READ(d->st.err_args);
	s->err_result_overflow = READ(d->st.err_result_overflow);
	s->err_internal = READ(d->st.err_internal);
	s->send_failed = READ(d->st.send_failed);
	s->err_result_overrun = READ(d->st.err_result_overrun);
	s->err_deadline = READ(d->st.err_deadline);
	s->failed = __atomic_load_n(&d->failed, __ATOMIC_ACQUIRE);
	s->bursts = READ(d->st.bursts);
	s->channel_error = READ(d->st.channel_error);
	s->running = READ(d->st.running);
	s->dropped = READ(d->st.dropped);
}

uint32_t ql_daemon_function_count(const struct ql_daemon *d)
{
	return ql_rpc_table_count(d->table);
}

int ql_daemon_function_stats(const struct ql_daemon *d, uint32_t index,
			     struct ql_daemon_function_stats *s)
{
	const struct ql_rpc_function *fn = ql_rpc_table_get(d->table, (int)index);

	if (!fn || !s)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	strncpy(s->name, fn->name ? fn->name : "", sizeof(s->name) - 1);
	s->id = fn->id;
	s->calls = READ(d->fn_calls[index]);
	s->errors = READ(d->fn_errors[index]);
	s->result_overruns = READ(d->fn_overruns[index]);
	return 0;
}

void ql_daemon_handler_hist(const struct ql_daemon *d, struct ql_hist *h)
{
	/* The dispatcher keeps writing: this is a snapshot, each bucket whole. */
	memcpy(h, &d->hist, sizeof(*h));
}
