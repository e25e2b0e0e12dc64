/* SPDX-License-Identifier: MIT */
/*
 * What the daemon's response counters mean, over a verbs channel (soft
 * provider) with a ring client in the same process: `responses` counts
 * SENDs completed (delivered), not SENDs handed to the channel.
 * - normal run: responses == sent == requests, nothing dropped;
 * - a client that stops re-posting receive buffers: the SEND that finds
 *   none fails RNR (server connected with rnr_retry 1), counted in
 *   dropped_rnr; the SENDs behind it are flushed (dropped_peer), and
 *   responses counts only the ones delivered;
 * - a client that disappears with requests in the ring: the SENDs that
 *   answer them exceed their transport retries, counted in dropped_peer;
 * - serving with the completions counted (and the counters read) takes no
 *   allocation, lock or system call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "echo_daemon.h"

#include <qlink/channel.h>
#include <qlink/clock.h>
#include <qlink/daemon.h>
#include <qlink/ring.h>
#include <qlink/rpc.h>
#include <qlink/verbs.h>

#include "hotpath.h"

#define SLOTS 16
#define SLOT_SIZE 128

struct fx {
	struct ql_device *sdev, *cdev;
	struct ql_channel *ch;
	struct ql_daemon *d;
	struct ql_ring_client *cl;
	uint32_t next;
};

static void open_fx(struct fx *f, const char *uri)
{
	struct ql_verbs_channel_config vc = { .num_slots = SLOTS, .slot_size = SLOT_SIZE };
	struct ql_daemon_config dc = { .cpu = -1 };
	struct ql_qp_connect_opts o;
	struct ql_conn_params sp, cp;

	memset(f, 0, sizeof(*f));
	assert_int_equal(ql_device_open(uri, &f->sdev), 0);
	assert_int_equal(ql_device_open(uri, &f->cdev), 0);
	assert_int_equal(ql_verbs_channel_create(f->sdev, &vc, &f->ch), 0);
	assert_int_equal(ql_daemon_create(&dc, f->ch, &f->d), 0);
	assert_int_equal(ql_daemon_register(f->d, &QL_RPC_RAW_FUNCTION("echo", ql_test_echo, NULL)),
			 0);
	assert_int_equal(ql_verbs_channel_local_params(f->ch, &sp), 0);
	assert_int_equal(ql_ring_client_create(f->cdev, &sp, NULL, &f->cl), 0);
	assert_int_equal(ql_ring_client_local_params(f->cl, &cp), 0);
	/* give up quickly: one RNR retry, short ACK timeout, one retry */
	ql_qp_connect_opts_default(&o);
	o.rnr_retry = 1;
	o.min_rnr_timer = 1;
	o.timeout = 8;
	o.retry_cnt = 1;
	assert_int_equal(ql_verbs_channel_connect(f->ch, &cp, &o), 0);
	assert_int_equal(ql_ring_client_connect(f->cl, &sp, NULL), 0);
}

static void close_fx(struct fx *f)
{
	ql_daemon_destroy(f->d);
	ql_ring_client_destroy(f->cl);
	ql_channel_destroy(f->ch);
	ql_device_close(f->cdev);
	ql_device_close(f->sdev);
}

static int send_echo(struct fx *f)
{
	uint8_t msg[64];
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = ql_rpc_fnv1a("echo"),
		.arg_len = 4,
		.request_id = f->next,
	};

	ql_rpc_header_encode(msg, &h);
	memcpy(msg + QL_RPC_HEADER_SIZE, &f->next, 4);
	f->next++;
	return ql_ring_client_send(f->cl, msg, QL_RPC_HEADER_SIZE + 4);
}

/* Serve and take responses until cond(stats) or 5 s; release them if
 * `release`. Responses taken are added to *got. */
static void drive(struct fx *f, bool release, uint64_t *got,
		  bool (*cond)(const struct ql_daemon_stats *s, void *arg), void *arg)
{
	uint64_t t0 = ql_clock_ns();
	struct ql_daemon_stats st;

	for (;;) {
		struct ql_ring_response r[16];
		int n;

		ql_daemon_poll(f->d);
		n = f->cl ? ql_ring_client_poll(f->cl, r, 16) : 0;
		for (int i = 0; i < n; i++) {
			(*got)++;
			if (release)
				assert_int_equal(ql_ring_client_release(f->cl, &r[i]), 0);
		}
		ql_daemon_stats(f->d, &st);
		if (cond(&st, arg))
			return;
		if (ql_clock_ns() - t0 > 5000000000ull)
			fail_msg(
				"timed out: requests %llu responses %llu sent %llu rnr %llu peer %llu",
				(unsigned long long)st.requests, (unsigned long long)st.responses,
				(unsigned long long)st.sent, (unsigned long long)st.dropped_rnr,
				(unsigned long long)st.dropped_peer);
	}
}

static bool all_delivered(const struct ql_daemon_stats *s, void *arg)
{
	return s->requests == *(uint64_t *)arg && s->responses == s->requests;
}

static bool settled(const struct ql_daemon_stats *s, void *arg)
{
	(void)arg;
	return s->sent && s->responses + s->dropped_rnr + s->dropped_peer == s->sent &&
	       (s->dropped_rnr || s->dropped_peer);
}

static void normal_run(struct fx *f, uint64_t n)
{
	uint64_t got = 0;

	for (uint64_t i = 0; i < n; i++) {
		assert_int_equal(send_echo(f), 0);
		drive(f, true, &got, all_delivered, &(uint64_t){ i + 1 });
	}
	assert_int_equal(got, n);
}

static void test_normal(void **state)
{
	struct ql_daemon_stats st;
	struct fx f;

	(void)state;
	open_fx(&f, "soft://loop");
	normal_run(&f, 100);
	ql_daemon_stats(f.d, &st);
	assert_int_equal(st.requests, 100);
	assert_int_equal(st.sent, 100);
	assert_int_equal(st.responses, 100);
	assert_int_equal(st.dropped_rnr, 0);
	assert_int_equal(st.dropped_peer, 0);
	close_fx(&f);
}

static void test_rnr(void **state)
{
	struct ql_daemon_stats st;
	uint64_t got = 0;
	struct fx f;

	(void)state;
	open_fx(&f, "soft://loop");
	normal_run(&f, 20);
	/* the client takes responses but re-posts no receive buffer: after
	 * SLOTS of them its receive queue is empty */
	for (int i = 0; i < 2 * SLOTS; i++) {
		int ret;

		while ((ret = send_echo(&f)) == -EAGAIN) {
			struct ql_ring_response r[16];
			int n;

			ql_daemon_poll(f.d);
			n = ql_ring_client_poll(f.cl, r, 16);
			assert_true(n >= 0);
			got += (uint64_t)n;
			ql_daemon_stats(f.d, &st);
			if (st.dropped_rnr)
				break;
		}
		if (ret)
			break;
	}
	drive(&f, false, &got, settled, NULL);
	ql_daemon_stats(f.d, &st);
	assert_int_equal(st.dropped_rnr, 1);
	/* delivered: the 20, then one per receive buffer the client had */
	assert_int_equal(st.responses, 20 + SLOTS);
	assert_int_equal(got, SLOTS);
	assert_int_equal(st.responses + st.dropped_rnr + st.dropped_peer, st.sent);
	assert_true(st.sent > st.responses);
	assert_int_not_equal(st.channel_error, 0);
	close_fx(&f);
}

static void test_peer_gone(void **state)
{
	struct ql_daemon_stats st;
	uint64_t got = 0;
	struct fx f;

	(void)state;
	open_fx(&f, "soft://loop");
	normal_run(&f, 10);
	for (int i = 0; i < 4; i++)
		assert_int_equal(send_echo(&f), 0);
	ql_ring_client_destroy(f.cl);
	f.cl = NULL;
	drive(&f, false, &got, settled, NULL);
	ql_daemon_stats(f.d, &st);
	assert_int_equal(st.requests, 14);
	assert_int_equal(st.responses, 10);
	assert_int_equal(st.dropped_rnr, 0);
	assert_int_equal(st.dropped_peer, 4);
	close_fx(&f);
}

/* Serving over the verbs channel, completions polled and counted by
 * outcome, the counters read: no allocation, lock or system call. */
static int serve_counted(void *arg)
{
	struct fx *f = arg;

	for (uint32_t i = 0; i < 100000; i++) {
		struct ql_ring_response r[16];
		struct ql_daemon_stats st;
		int n = 0;

		if (send_echo(f))
			return -1;
		for (int k = 0; k < 1000 && !n; k++) {
			if (ql_daemon_poll(f->d) < 0)
				return -1;
			n = ql_ring_client_poll(f->cl, r, 16);
		}
		if (n != 1 || ql_ring_client_release(f->cl, &r[0]))
			return -1;
		ql_daemon_stats(f->d, &st);
		if (st.dropped_rnr || st.dropped_peer || st.responses > st.sent)
			return -1;
	}
	return 0;
}

static void test_hot_path(void **state)
{
	char why[160];
	struct fx f;

	(void)state;
	open_fx(&f, "soft://loop");
	normal_run(&f, 10);
	if (hp_check(serve_counted, &f, why, sizeof(why)))
		fail_msg("100k calls over a verbs channel: %s", why);
	close_fx(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_normal),
		cmocka_unit_test(test_rnr),
		cmocka_unit_test(test_peer_gone),
		cmocka_unit_test(test_hot_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
