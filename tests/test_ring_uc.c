/* SPDX-License-Identifier: MIT */
/*
 * The ring over UC with losses injected by the soft NIC, and the slot len
 * bound: every request is answered (resent when its request or response was
 * lost), the handler runs exactly once per request_id (a resend is answered
 * from the server's cache), losses are counted on both sides; a slot len
 * beyond the slot is answered BAD_LENGTH.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "qlink/channel.h"
#include "qlink/clock.h"
#include "qlink/ring.h"
#include "qlink/rpc.h"

#define NREQ 3000u

/* The handler: counts its calls per request_id and answers arg + 1. */
struct calls {
	uint32_t n[NREQ];
	uint32_t total;
};

static struct calls g_calls;

static int32_t h_inc(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	struct calls *c = ctx;
	uint32_t v, id;
	uint8_t *p;

	if (in->end - in->p != 8)
		return 1;
	memcpy(&id, in->p, 4);
	memcpy(&v, in->p + 4, 4);
	if (id < NREQ)
		c->n[id]++;
	c->total++;
	v++;
	p = ql_rpc_out_reserve(out, 4);
	if (!p)
		return -1;
	memcpy(p, &v, 4);
	return 0;
}

static struct ql_rpc_table *make_table(void)
{
	struct ql_rpc_table *t;
	struct ql_rpc_function f = {
		.name = "inc", .id = ql_rpc_fnv1a("inc"), .fn = h_inc, .ctx = &g_calls
	};

	assert_int_equal(ql_rpc_table_create(4, &t), 0);
	assert_true(ql_rpc_table_add(t, &f) >= 0);
	return t;
}

static uint32_t make_req(uint8_t *m, uint32_t id, uint32_t v)
{
	struct ql_rpc_header h = { .magic = QL_RPC_MAGIC_REQUEST,
				   .function_id = ql_rpc_fnv1a("inc"),
				   .arg_len = 8,
				   .request_id = id,
				   .ptp_timestamp = 0 };

	ql_rpc_header_encode(m, &h);
	memcpy(m + QL_RPC_HEADER_SIZE, &id, 4);
	memcpy(m + QL_RPC_HEADER_SIZE + 4, &v, 4);
	return QL_RPC_HEADER_SIZE + 8;
}

/* The server's turn: take what arrived, dispatch, answer. */
static int serve(struct ql_channel *ch, const struct ql_rpc_table *t)
{
	struct ql_buffer *rx[16];
	int n = ql_channel_receive_burst(ch, rx, 16);

	assert_true(n >= 0);
	for (int i = 0; i < n; i++) {
		struct ql_buffer *tx = ql_channel_acquire_buffer(ch);
		size_t rl;

		assert_non_null(tx);
		ql_buffer_reset(tx, 0);
		ql_rpc_dispatch(t, ql_buffer_data(rx[i]), rx[i]->len, ql_buffer_data(tx),
				tx->capacity, &rl, NULL);
		tx->len = (uint32_t)rl;
		ql_channel_release_buffer(ch, rx[i]);
		assert_int_equal(ql_channel_send_burst(ch, &tx, 1), 1);
	}
	return n;
}

struct pair {
	struct ql_device *sdev, *cdev;
	struct ql_channel *ch;
	struct ql_ring_client *cl;
};

static uint32_t g_dup_cache = 16;

static void pair_open(struct pair *p, const char *suri, const char *curi, enum ibv_qp_type type,
		      const struct ql_ring_client_config *ccfg)
{
	struct ql_verbs_channel_config cfg = {
		.num_slots = 16, .slot_size = 128, .qp_type = type, .dup_cache = g_dup_cache
	};
	struct ql_conn_params sp, cp;

	assert_int_equal(ql_device_open(suri, &p->sdev), 0);
	assert_int_equal(ql_device_open(curi, &p->cdev), 0);
	assert_int_equal(ql_verbs_channel_create(p->sdev, &cfg, &p->ch), 0);
	assert_int_equal(ql_verbs_channel_local_params(p->ch, &sp), 0);
	assert_int_equal(ql_ring_client_create(p->cdev, &sp, ccfg, &p->cl), 0);
	assert_int_equal(ql_ring_client_local_params(p->cl, &cp), 0);
	assert_int_equal(ql_verbs_channel_connect(p->ch, &cp, NULL), 0);
	assert_int_equal(ql_ring_client_connect(p->cl, &sp, NULL), 0);
}

static void pair_close(struct pair *p)
{
	ql_ring_client_destroy(p->cl);
	ql_channel_destroy(p->ch);
	assert_int_equal(ql_device_close(p->cdev), 0);
	assert_int_equal(ql_device_close(p->sdev), 0);
}

/* Drive NREQ calls through; returns the client's stats. */
static void run_calls(struct pair *p, const struct ql_rpc_table *t, uint32_t window,
		      struct ql_ring_client_stats *cst)
{
	uint64_t deadline = ql_clock_ns() + 60ull * 1000000000ull;
	uint32_t sent = 0, got = 0;
	uint8_t m[64];

	memset(&g_calls, 0, sizeof(g_calls));
	while (got < NREQ) {
		struct ql_ring_response r[16];
		int n;

		assert_true(ql_clock_ns() < deadline);
		while (sent < NREQ && sent - got < window) {
			int ret = ql_ring_client_send(p->cl, m, make_req(m, sent, sent * 3));

			if (ret == -EAGAIN)
				break;
			assert_int_equal(ret, 0);
			sent++;
		}
		serve(p->ch, t);
		n = ql_ring_client_poll(p->cl, r, 16);
		assert_true(n >= 0);
		for (int i = 0; i < n; i++) {
			struct ql_rpc_response rh;
			uint32_t v;

			/* in request order, none given up, the right answer */
			assert_non_null(r[i].msg);
			assert_int_equal(r[i].len, QL_RPC_RESPONSE_SIZE + 4);
			ql_rpc_response_decode(r[i].msg, &rh);
			assert_int_equal(rh.status, 0);
			assert_int_equal(rh.request_id, got);
			memcpy(&v, r[i].msg + QL_RPC_RESPONSE_SIZE, 4);
			assert_int_equal(v, got * 3 + 1);
			assert_int_equal(ql_ring_client_release(p->cl, &r[i]), 0);
			got++;
		}
	}
	assert_int_equal(ql_ring_client_in_flight(p->cl), 0);
	assert_int_equal(ql_ring_client_stats(p->cl, cst), 0);
	/* exactly once per request_id, resends included */
	for (uint32_t i = 0; i < NREQ; i++)
		assert_int_equal(g_calls.n[i], 1);
	assert_int_equal(g_calls.total, NREQ);
}

/* UC with requests (client side, random) and responses (server side,
 * every 13th SEND) dropped. */
static void test_uc_loss_recovered(void **state)
{
	struct ql_ring_client_config ccfg = { .qp_type = IBV_QPT_UC,
					      .resend_ns = 1000000,
					      .max_resends = 50 };
	struct ql_rpc_table *t = make_table();
	struct ql_ring_client_stats cst;
	struct ql_verbs_channel_uc_stats sst;
	struct ql_device_counters sc, cc;
	struct pair p;

	(void)state;
	pair_open(&p, "soft+shm://ucsrv?drop_nth=13", "soft+shm://uccli?loss=0.03&seed=7",
		  IBV_QPT_UC, &ccfg);
	run_calls(&p, t, 8, &cst);
	assert_int_equal(ql_verbs_channel_uc_stats(p.ch, &sst), 0);
	assert_int_equal(ql_device_counters(p.sdev, &sc), 0);
	assert_int_equal(ql_device_counters(p.cdev, &cc), 0);
	/* losses happened on both wires and were counted on both sides */
	assert_true(sc.uc_drop_injected > 0);
	assert_true(cc.uc_drop_injected > 0);
	assert_true(cst.resent > 0);
	assert_int_equal(cst.lost, 0);
	/* every lost response was answered again from the cache */
	assert_true(sst.dup_answered >= sc.uc_drop_injected);
	assert_int_equal(sst.dup_missed, 0);
	pair_close(&p);
	ql_rpc_table_destroy(t);
}

/* UC with no loss: nothing is resent, nothing answered twice. */
static void test_uc_clean(void **state)
{
	struct ql_ring_client_config ccfg = { .qp_type = IBV_QPT_UC, .resend_ns = 1000000000 };
	struct ql_rpc_table *t = make_table();
	struct ql_ring_client_stats cst;
	struct ql_verbs_channel_uc_stats sst;
	struct pair p;

	(void)state;
	pair_open(&p, "soft+shm://ucsrv2", "soft+shm://uccli2", IBV_QPT_UC, &ccfg);
	run_calls(&p, t, 16, &cst);
	assert_int_equal(ql_verbs_channel_uc_stats(p.ch, &sst), 0);
	assert_int_equal(cst.resent, 0);
	assert_int_equal(cst.dup_responses, 0);
	assert_int_equal(sst.dup_answered, 0);
	pair_close(&p);
	ql_rpc_table_destroy(t);
}

/* RC is never injected: the transport would retransmit. */
static void test_rc_not_injected(void **state)
{
	struct ql_rpc_table *t = make_table();
	struct ql_ring_client_stats cst;
	struct ql_device_counters sc, cc;
	struct pair p;

	(void)state;
	pair_open(&p, "soft+shm://rcsrv?drop_nth=2", "soft+shm://rccli?loss=0.5&seed=1", IBV_QPT_RC,
		  NULL);
	run_calls(&p, t, 16, &cst);
	assert_int_equal(ql_device_counters(p.sdev, &sc), 0);
	assert_int_equal(ql_device_counters(p.cdev, &cc), 0);
	assert_int_equal(sc.uc_drop_injected, 0);
	assert_int_equal(cc.uc_drop_injected, 0);
	assert_int_equal(cst.resent, 0);
	pair_close(&p);
	ql_rpc_table_destroy(t);
}

/* A request that never arrives is given up after max_resends: it comes
 * back in its place as a lost response (msg NULL) and is counted. */
static void test_uc_give_up(void **state)
{
	struct ql_ring_client_config ccfg = { .qp_type = IBV_QPT_UC,
					      .resend_ns = 1000000,
					      .max_resends = 3 };
	struct ql_ring_client_stats cst;
	struct ql_ring_response r[4];
	uint64_t deadline = ql_clock_ns() + 10ull * 1000000000ull;
	struct pair p;
	uint8_t m[64];
	int n;

	(void)state;
	/* loss=1: every UC message of the client is dropped */
	pair_open(&p, "soft+shm://gusrv", "soft+shm://gucli?loss=1", IBV_QPT_UC, &ccfg);
	assert_int_equal(ql_ring_client_send(p.cl, m, make_req(m, 5, 1)), 0);
	do {
		assert_true(ql_clock_ns() < deadline);
		n = ql_ring_client_poll(p.cl, r, 4);
		assert_true(n >= 0);
	} while (!n);
	assert_int_equal(n, 1);
	assert_null(r[0].msg);
	assert_int_equal(r[0].len, 0);
	assert_int_equal(ql_ring_client_release(p.cl, &r[0]), 0);
	assert_int_equal(ql_ring_client_stats(p.cl, &cst), 0);
	assert_int_equal(cst.resent, 3);
	assert_int_equal(cst.lost, 1);
	pair_close(&p);
}

static void test_loss_uri_errors(void **state)
{
	static const char *bad[] = {
		"soft+shm://x?loss=2",	    "soft+shm://x?loss=-0.1", "soft+shm://x?drop_nth=0",
		"soft+shm://x?loss",	    "soft+shm://x?bogus=1",   "soft+shm://x?seed=abc",
		"soft+shm://x?drop_nth=-1", "soft://loop?loss=x",
	};
	struct ql_device *d;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ql_device_open(bad[i], &d), -EINVAL);
	assert_int_equal(ql_device_open("soft://loop?loss=0.5&seed=3", &d), 0);
	assert_int_equal(ql_device_close(d), 0);
	assert_int_equal(ql_device_open("soft+shm://x?drop_nth=5", &d), 0);
	assert_int_equal(ql_device_close(d), 0);
}

/* ---- the slot len bound ------------------------------------------------- */

/* Push a request with slot len `len` through a loop channel (slot 64:
 * messages of up to 48 bytes) and dispatch it: the status. */
static int32_t status_for_len(const struct ql_rpc_table *t, uint32_t len, uint32_t arg_len)
{
	struct ql_channel *ch;
	struct ql_buffer *rx[1];
	struct ql_rpc_header h = { .magic = QL_RPC_MAGIC_REQUEST,
				   .function_id = ql_rpc_fnv1a("inc"),
				   .arg_len = arg_len,
				   .request_id = 77 };
	struct ql_rpc_dispatch_info info;
	uint8_t m[48] = { 0 }, resp[64];
	size_t rl;
	int32_t st;

	ql_rpc_header_encode(m, &h);
	assert_int_equal(ql_loop_channel_create(4, 64, &ch), 0);
	assert_int_equal(ql_loop_channel_push(ch, m, len, sizeof(m)), 0);
	assert_int_equal(ql_channel_receive_burst(ch, rx, 1), 1);
	assert_true(rx[0]->len <= 48);
	st = ql_rpc_dispatch(t, ql_buffer_data(rx[0]), rx[0]->len, resp, sizeof(resp), &rl, &info);
	if (st != QL_RPC_E_SHORT)
		assert_int_equal(info.request_id, 77); /* echoed */
	ql_channel_destroy(ch);
	return st;
}

static void test_slot_len_bounds(void **state)
{
	struct ql_rpc_table *t = make_table();

	(void)state;
	/* the largest valid len: the slot minus its 16-byte header */
	assert_int_equal(status_for_len(t, 48, 8), 0);
	assert_int_equal(status_for_len(t, 32, 8), 0);
	/* trailing bytes after the arguments are allowed (and ignored) */
	assert_int_equal(status_for_len(t, 48, 8), 0);
	/* one past the slot: BAD_LENGTH, though arg_len would fit */
	assert_int_equal(status_for_len(t, 49, 8), QL_RPC_E_BAD_LENGTH);
	assert_int_equal(status_for_len(t, 0xffffffffu, 8), QL_RPC_E_BAD_LENGTH);
	assert_int_equal(status_for_len(t, 0xffffffffu, 0), QL_RPC_E_BAD_LENGTH);
	/* arguments beyond len */
	assert_int_equal(status_for_len(t, 31, 8), QL_RPC_E_BAD_LENGTH);
	/* shorter than a header */
	assert_int_equal(status_for_len(t, 23, 8), QL_RPC_E_SHORT);
	assert_int_equal(status_for_len(t, 0, 8), QL_RPC_E_SHORT);
	ql_rpc_table_destroy(t);
}

/* A client that keeps more requests outstanding than the server's cache
 * (against the rule): a resend whose response the cache no longer holds is
 * not answered (the handler never runs twice), counted on the server
 * (dup_missed) and given up by the client (lost, msg NULL). */
static void test_uc_window_beyond_cache(void **state)
{
	struct ql_ring_client_config ccfg = { .qp_type = IBV_QPT_UC,
					      .resend_ns = 1000000,
					      .max_resends = 2 };
	struct ql_rpc_table *t = make_table();
	struct ql_ring_client_stats cst;
	struct ql_verbs_channel_uc_stats sst;
	uint64_t deadline = ql_clock_ns() + 30ull * 1000000000ull;
	uint32_t sent = 0, got = 0, lost = 0;
	struct pair p;
	uint8_t m[64];

	(void)state;
	memset(&g_calls, 0, sizeof(g_calls));
	g_dup_cache = 2;
	/* the server's 2nd, 4th, ... responses are lost */
	pair_open(&p, "soft+shm://wcsrv?drop_nth=2", "soft+shm://wccli", IBV_QPT_UC, &ccfg);
	g_dup_cache = 16;
	/* 8 requests at once, then wait for all of them */
	for (; sent < 8; sent++)
		assert_int_equal(ql_ring_client_send(p.cl, m, make_req(m, sent, sent)), 0);
	while (got < 8) {
		struct ql_ring_response r[8];
		int n;

		assert_true(ql_clock_ns() < deadline);
		serve(p.ch, t);
		n = ql_ring_client_poll(p.cl, r, 8);
		assert_true(n >= 0);
		for (int i = 0; i < n; i++, got++) {
			lost += !r[i].msg;
			assert_int_equal(ql_ring_client_release(p.cl, &r[i]), 0);
		}
	}
	assert_int_equal(ql_verbs_channel_uc_stats(p.ch, &sst), 0);
	assert_int_equal(ql_ring_client_stats(p.cl, &cst), 0);
	assert_true(sst.dup_missed > 0);
	assert_true(lost > 0);
	assert_int_equal(cst.lost, lost);
	for (uint32_t i = 0; i < 8; i++)
		assert_int_equal(g_calls.n[i], 1); /* never twice */
	pair_close(&p);
	ql_rpc_table_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_len_bounds),
		cmocka_unit_test(test_loss_uri_errors),
		cmocka_unit_test(test_uc_clean),
		cmocka_unit_test(test_rc_not_injected),
		cmocka_unit_test(test_uc_loss_recovered),
		cmocka_unit_test(test_uc_give_up),
		cmocka_unit_test(test_uc_window_beyond_cache),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
