/* SPDX-License-Identifier: MIT */
/*
 * The dispatcher: many daemons (loopback channels) served round robin by one
 * thread, each answering only its own channel with its own statistics;
 * attach, detach and moving a daemon between dispatchers while requests
 * flow, with none lost; the misuse cases; the idle policies backing off
 * (and not backing off when spinning); and a round over 16 channels with no
 * allocation, lock or system call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "demo/demo.h"
#include <qlink/channel.h>
#include <qlink/clock.h>
#include <qlink/daemon.h>
#include <qlink/dispatcher.h>
#include <qlink/rpc.h>

#include "echo_daemon.h"
#include "hotpath.h"

#define NCH 16
#define SLOTS 16
#define SLOT_SIZE 128

struct fixture {
	struct ql_channel *ch[NCH];
	struct ql_daemon *d[NCH];
	struct ql_dispatcher *p;
	uint8_t resp[SLOT_SIZE];
};

static int setup(void **state)
{
	struct ql_dispatcher_config pc = { .cpu = -1 };
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || ql_dispatcher_create(&pc, &f->p))
		return -1;
	for (int i = 0; i < NCH; i++) {
		if (ql_loop_channel_create(SLOTS, SLOT_SIZE, &f->ch[i]) ||
		    ql_test_echo_daemon(f->ch[i], &f->d[i]))
			return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ql_dispatcher_destroy(f->p);
	ql_test_echo_daemons_destroy(f->d, f->ch, NCH);
	free(f);
	return 0;
}

/* An echo request carrying (channel, n). */
static uint32_t make_req(uint8_t *buf, uint32_t ch, uint32_t n)
{
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = ql_rpc_fnv1a("echo"),
		.arg_len = 8,
		.request_id = n,
	};

	ql_rpc_header_encode(buf, &h);
	memcpy(buf + QL_RPC_HEADER_SIZE, &ch, 4);
	memcpy(buf + QL_RPC_HEADER_SIZE + 4, &n, 4);
	return QL_RPC_HEADER_SIZE + 8;
}

static int push(struct fixture *f, uint32_t ch, uint32_t n)
{
	uint8_t msg[64];
	uint32_t len = make_req(msg, ch, n);

	return ql_loop_channel_push(f->ch[ch], msg, len, len);
}

/* Wait (up to 5 s) for the response to (ch, n) and check it is that one. */
static void expect(struct fixture *f, uint32_t ch, uint32_t n)
{
	uint64_t t0 = ql_clock_ns();
	struct ql_rpc_response r;
	uint32_t got_ch, got_n;
	int len;

	while ((len = ql_loop_channel_pop(f->ch[ch], f->resp, sizeof(f->resp))) == -EAGAIN) {
		if (ql_clock_ns() - t0 > 5000000000ull)
			fail_msg("channel %u: no response to request %u in 5 s", ch, n);
	}
	assert_int_equal(len, QL_RPC_RESPONSE_SIZE + 8);
	ql_rpc_response_decode(f->resp, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.request_id, n);
	memcpy(&got_ch, f->resp + QL_RPC_RESPONSE_SIZE, 4);
	memcpy(&got_n, f->resp + QL_RPC_RESPONSE_SIZE + 4, 4);
	assert_int_equal(got_ch, ch);
	assert_int_equal(got_n, n);
}

static void no_response(struct fixture *f, uint32_t ch, unsigned ms)
{
	struct timespec ts = { 0, (long)ms * 1000000 };

	nanosleep(&ts, NULL);
	assert_int_equal(ql_loop_channel_pop(f->ch[ch], f->resp, sizeof(f->resp)), -EAGAIN);
}

/* 16 channels, one thread: each answers its own requests, counts its own. */
static void test_many_channels(void **state)
{
	struct fixture *f = *state;
	struct ql_dispatcher_stats ps;
	struct ql_daemon_stats st;

	for (int i = 0; i < NCH; i++)
		assert_int_equal(ql_dispatcher_attach(f->p, f->d[i]), 0);
	assert_int_equal(ql_dispatcher_start(f->p), 0);
	assert_int_equal(ql_dispatcher_start(f->p), -EALREADY);
	for (uint32_t round = 0; round < 200; round++) {
		/* channel i gets i % 4 + 1 requests this round */
		for (uint32_t i = 0; i < NCH; i++)
			for (uint32_t k = 0; k <= i % 4; k++)
				assert_int_equal(push(f, i, round * 4 + k), 0);
		for (uint32_t i = 0; i < NCH; i++)
			for (uint32_t k = 0; k <= i % 4; k++)
				expect(f, i, round * 4 + k);
	}
	for (uint32_t i = 0; i < NCH; i++) {
		ql_daemon_stats(f->d[i], &st);
		assert_int_equal(st.requests, 200 * (i % 4 + 1));
		assert_int_equal(st.ok, 200 * (i % 4 + 1));
		assert_int_equal(st.running, 1);
	}
	/* the dispatcher adds a round's requests to its count after the
	 * round, so after its answers are seen: wait for the last round's */
	for (int ms = 0; ms < 5000; ms++) {
		struct timespec ts = { 0, 1000000 };

		ql_dispatcher_stats(f->p, &ps);
		if (ps.requests >= 200 * (4 * 1 + 4 * 2 + 4 * 3 + 4 * 4))
			break;
		nanosleep(&ts, NULL);
	}
	assert_int_equal(ps.daemons, NCH);
	assert_int_equal(ps.requests, 200 * (4 * 1 + 4 * 2 + 4 * 3 + 4 * 4));
	assert_true(ps.rounds > 0);
	assert_int_equal(ps.running, 1);
	assert_int_equal(ql_dispatcher_stop(f->p), 0);
	ql_daemon_stats(f->d[0], &st);
	assert_int_equal(st.running, 0);
}

struct traffic {
	struct fixture *f;
	_Atomic int stop;
	uint32_t channels; /* the client drives channels 0..channels-1 */
	uint64_t done;
	int failed;
};

/* A client keeping one request in flight on each of its channels. */
static void *client(void *arg)
{
	struct traffic *t = arg;
	uint32_t next[NCH] = { 0 };
	bool waiting[NCH] = { false };

	while (!atomic_load(&t->stop)) {
		for (uint32_t c = 0; c < t->channels; c++) {
			int len;

			if (!waiting[c]) {
				if (push(t->f, c, next[c])) {
					t->failed = 1;
					return NULL;
				}
				waiting[c] = true;
			}
			len = ql_loop_channel_pop(t->f->ch[c], t->f->resp, sizeof(t->f->resp));
			if (len == -EAGAIN)
				continue;
			if (len != QL_RPC_RESPONSE_SIZE + 8 ||
			    ql_rpc_get_u32(t->f->resp + 12) != next[c]) {
				t->failed = 2;
				return NULL;
			}
			waiting[c] = false;
			next[c]++;
			t->done++;
		}
	}
	/* every request sent is answered once a dispatcher serves its daemon */
	for (uint32_t c = 0; c < t->channels; c++) {
		uint64_t t0 = ql_clock_ns();

		while (waiting[c] &&
		       ql_loop_channel_pop(t->f->ch[c], t->f->resp, sizeof(t->f->resp)) == -EAGAIN)
			if (ql_clock_ns() - t0 > 5000000000ull) {
				t->failed = 3;
				return NULL;
			}
	}
	return NULL;
}

/* Attach, detach and move daemons between two running dispatchers while a
 * client keeps requests in flight on every channel: nothing is lost, and a
 * detached daemon is not served. */
static void test_attach_detach_running(void **state)
{
	struct fixture *f = *state;
	struct ql_dispatcher_config pc = { .cpu = -1 };
	struct ql_dispatcher *q;
	struct ql_dispatcher_stats ps, qs;
	struct traffic t = { .f = f, .channels = 4 };
	struct ql_dispatcher *at[4];
	pthread_t th;

	assert_int_equal(ql_dispatcher_create(&pc, &q), 0);
	assert_int_equal(ql_dispatcher_start(f->p), 0);
	assert_int_equal(ql_dispatcher_start(q), 0);
	for (int i = 0; i < 4; i++) {
		at[i] = i % 2 ? q : f->p;
		assert_int_equal(ql_dispatcher_attach(at[i], f->d[i]), 0);
	}
	assert_int_equal(pthread_create(&th, NULL, client, &t), 0);
	for (int k = 0; k < 200; k++) {
		int i = k % 4;
		struct ql_dispatcher *to = at[i] == q ? f->p : q;

		/* move it: detach from one, attach to the other */
		assert_int_equal(ql_dispatcher_detach(at[i], f->d[i]), 0);
		assert_int_equal(ql_dispatcher_attach(to, f->d[i]), 0);
		at[i] = to;
	}
	atomic_store(&t.stop, 1);
	pthread_join(th, NULL);
	assert_int_equal(t.failed, 0);
	assert_true(t.done > 0);
	ql_dispatcher_stats(f->p, &ps);
	ql_dispatcher_stats(q, &qs);
	assert_int_equal(ps.daemons + qs.daemons, 4);
	assert_true(ps.requests > 0 && qs.requests > 0);

	/* a detached daemon is not polled any more: its request waits */
	for (int i = 0; i < 4; i++) {
		assert_int_equal(ql_dispatcher_detach(at[i] == q ? f->p : q, f->d[i]), -ENOENT);
		assert_int_equal(ql_dispatcher_detach(at[i], f->d[i]), 0);
	}
	assert_int_equal(push(f, 0, 77), 0);
	no_response(f, 0, 20);
	/* ... and is the caller's again: it serves in this thread */
	assert_int_equal(ql_daemon_poll(f->d[0]), 1);
	expect(f, 0, 77);
	ql_dispatcher_destroy(q);
}

static void test_misuse(void **state)
{
	struct fixture *f = *state;
	struct ql_dispatcher_config pc = { .cpu = -1, .max_daemons = 2 };
	struct ql_dispatcher *q;

	assert_int_equal(ql_dispatcher_create(&pc, &q), 0);
	assert_int_equal(ql_dispatcher_attach(q, f->d[0]), 0);
	assert_int_equal(ql_dispatcher_attach(q, f->d[0]), -EBUSY);
	assert_int_equal(ql_dispatcher_attach(f->p, f->d[0]), -EBUSY);
	assert_int_equal(ql_daemon_start(f->d[0]), -EALREADY);
	assert_int_equal(ql_daemon_register(f->d[0], ql_demo_parity_function()), -EBUSY);
	assert_int_equal(ql_dispatcher_attach(q, f->d[1]), 0);
	assert_int_equal(ql_dispatcher_attach(q, f->d[2]), -ENOSPC);
	assert_int_equal(ql_dispatcher_detach(q, f->d[2]), -ENOENT);
	assert_int_equal(ql_dispatcher_detach(f->p, f->d[0]), -ENOENT);
	/* a daemon on its private dispatcher cannot join a shared one */
	assert_int_equal(ql_daemon_start(f->d[3]), 0);
	assert_int_equal(ql_dispatcher_attach(f->p, f->d[3]), -EBUSY);
	assert_int_equal(ql_daemon_stop(f->d[3]), 0);
	assert_int_equal(ql_dispatcher_attach(f->p, f->d[3]), 0);
	/* ql_daemon_stop detaches it from the shared one */
	assert_int_equal(ql_daemon_stop(f->d[3]), 0);
	assert_int_equal(ql_dispatcher_detach(f->p, f->d[3]), -ENOENT);
	/* polling in the caller's thread while the thread runs */
	assert_int_equal(ql_dispatcher_start(q), 0);
	assert_int_equal(ql_dispatcher_poll(q), -EBUSY);
	assert_int_equal(ql_dispatcher_stop(q), 0);
	assert_int_equal(ql_dispatcher_poll(q), 0);
	/* destroy detaches: the daemons are free again */
	ql_dispatcher_destroy(q);
	assert_int_equal(ql_dispatcher_attach(f->p, f->d[0]), 0);
	assert_int_equal(ql_dispatcher_detach(f->p, f->d[0]), 0);

	pc.idle = (enum ql_idle_policy)7;
	assert_int_equal(ql_dispatcher_create(&pc, &q), -EINVAL);
	pc.idle = QL_IDLE_SLEEP;
	pc.sleep_ns = QL_DISPATCHER_MAX_SLEEP_NS + 1; /* a peer's retries would run out */
	assert_int_equal(ql_dispatcher_create(&pc, &q), -EINVAL);
	pc.sleep_ns = QL_DISPATCHER_MAX_SLEEP_NS;
	assert_int_equal(ql_dispatcher_create(&pc, &q), 0);
	ql_dispatcher_destroy(q);
	assert_int_equal(ql_dispatcher_create(NULL, &q), -EINVAL);
}

/* Pollers (ql_dispatcher_attach_poll): called once a round, in the
 * round's thread, after the daemons; gone after detach. */
static _Atomic int poll_calls;

static int count_poll(void *arg)
{
	atomic_fetch_add(&poll_calls, 1);
	return arg ? 1 : 0;
}

static void test_pollers(void **state)
{
	struct fixture *f = *state;
	int mark = 0;
	uint64_t t0;

	atomic_store(&poll_calls, 0);
	assert_int_equal(ql_dispatcher_attach_poll(f->p, NULL, NULL), -EINVAL);
	assert_int_equal(ql_dispatcher_detach_poll(f->p, count_poll, NULL), -ENOENT);
	assert_int_equal(ql_dispatcher_attach_poll(f->p, count_poll, NULL), 0);
	assert_int_equal(ql_dispatcher_attach(f->p, f->d[0]), 0);
	/* by hand: one call a round, the daemon served as before */
	assert_int_equal(ql_dispatcher_poll(f->p), 0);
	assert_int_equal(atomic_load(&poll_calls), 1);
	assert_int_equal(push(f, 0, 1), 0);
	assert_int_equal(ql_dispatcher_poll(f->p), 1);
	assert_int_equal(atomic_load(&poll_calls), 2);
	expect(f, 0, 1);
	/* a second poller (another arg), by the thread */
	assert_int_equal(ql_dispatcher_attach_poll(f->p, count_poll, &mark), 0);
	assert_int_equal(ql_dispatcher_start(f->p), 0);
	t0 = ql_clock_ns();
	while (atomic_load(&poll_calls) < 1000)
		assert_true(ql_clock_ns() - t0 < 5000000000ull);
	assert_int_equal(push(f, 0, 2), 0);
	expect(f, 0, 2);
	/* detached (running): not called once it returns */
	assert_int_equal(ql_dispatcher_detach_poll(f->p, count_poll, NULL), 0);
	assert_int_equal(ql_dispatcher_detach_poll(f->p, count_poll, &mark), 0);
	{
		int n = atomic_load(&poll_calls);

		usleep(20000);
		assert_int_equal(atomic_load(&poll_calls), n);
	}
	assert_int_equal(ql_dispatcher_detach_poll(f->p, count_poll, &mark), -ENOENT);
	assert_int_equal(ql_dispatcher_stop(f->p), 0);
	assert_int_equal(ql_dispatcher_detach(f->p, f->d[0]), 0);
}

static void test_idle_policy_names(void **state)
{
	enum ql_idle_policy p;

	(void)state;
	assert_int_equal(ql_idle_policy_parse("yield", &p), 0);
	assert_int_equal(p, QL_IDLE_YIELD);
	assert_int_equal(ql_idle_policy_parse("sleep", &p), 0);
	assert_int_equal(p, QL_IDLE_SLEEP);
	assert_int_equal(ql_idle_policy_parse("spin", &p), 0);
	assert_int_equal(p, QL_IDLE_SPIN);
	assert_int_equal(ql_idle_policy_parse("nap", &p), -EINVAL);
	assert_int_equal(ql_idle_policy_parse(NULL, &p), -EINVAL);
	assert_string_equal(ql_idle_policy_str(QL_IDLE_SLEEP), "sleep");
}

/* Each policy on an idle channel for 30 ms: yield and sleep back off after
 * idle_after_ns, spin never does; a request after the back-off is still
 * answered and ends it. */
static void test_idle_policies(void **state)
{
	struct fixture *f = *state;
	const enum ql_idle_policy pol[] = { QL_IDLE_SPIN, QL_IDLE_YIELD, QL_IDLE_SLEEP };

	for (int k = 0; k < 3; k++) {
		struct ql_dispatcher_config pc = {
			.cpu = -1, .idle = pol[k], .idle_after_ns = 1000000, .sleep_ns = 20000
		};
		struct ql_dispatcher_stats s1, s2;
		struct ql_dispatcher *q;

		assert_int_equal(ql_dispatcher_create(&pc, &q), 0);
		assert_int_equal(ql_dispatcher_attach(q, f->d[k]), 0);
		assert_int_equal(ql_dispatcher_start(q), 0);
		no_response(f, k, 30);
		ql_dispatcher_stats(q, &s1);
		if (pol[k] == QL_IDLE_SPIN)
			assert_int_equal(s1.backoffs, 0);
		else
			assert_true(s1.backoffs > 0);
		no_response(f, k, 20);
		ql_dispatcher_stats(q, &s2);
		if (pol[k] == QL_IDLE_SLEEP)
			/* backed off, it naps every round: 20 ms of 20 us naps
			 * is at most 1000 rounds, not the millions of a spin */
			assert_true(s2.rounds - s1.rounds <= 1000);
		if (pol[k] != QL_IDLE_SPIN) /* every idle round backs off (snapshots
					       may split one round) */
			assert_true(s2.rounds - s1.rounds - (s2.backoffs - s1.backoffs) + 1 <= 2);
		assert_int_equal(push(f, (uint32_t)k, 5), 0);
		expect(f, (uint32_t)k, 5);
		ql_dispatcher_stats(q, &s2);
		assert_int_equal(s2.requests, 1);
		ql_dispatcher_destroy(q);
	}
}

/* Rounds over 16 channels, requests on a few of them at a time: no
 * allocator, lock or system call. */
static int serve_many(void *arg)
{
	struct fixture *f = arg;

	for (uint32_t i = 0; i < 200000; i++) {
		uint32_t a = i % NCH, b = (i * 7 + 3) % NCH;

		if (push(f, a, i) || (b != a && push(f, b, i)))
			return -1;
		if (ql_dispatcher_poll(f->p) != (a == b ? 1 : 2))
			return -1;
		if (ql_loop_channel_pop(f->ch[a], f->resp, sizeof(f->resp)) != 24 + 8 ||
		    (b != a && ql_loop_channel_pop(f->ch[b], f->resp, sizeof(f->resp)) != 24 + 8))
			return -1;
		if (ql_dispatcher_poll(f->p) != 0) /* an idle round */
			return -1;
	}
	return 0;
}

static void test_hot_path(void **state)
{
	struct fixture *f = *state;
	char why[160];

	for (int i = 0; i < NCH; i++)
		assert_int_equal(ql_dispatcher_attach(f->p, f->d[i]), 0);
	if (hp_check(serve_many, f, why, sizeof(why)))
		fail_msg("%s: %s", "200k rounds over 16 channels", why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_many_channels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_attach_detach_running, setup, teardown),
		cmocka_unit_test_setup_teardown(test_misuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pollers, setup, teardown),
		cmocka_unit_test(test_idle_policy_names),
		cmocka_unit_test_setup_teardown(test_idle_policies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hot_path, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
