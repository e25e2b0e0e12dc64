/* SPDX-License-Identifier: MIT */
/*
 * Frame handlers on a daemon, and the built-in rpc_increment (CUDA-Q
 * Realtime's test function): its function id, CUDA-Q's own request and
 * reply bytes, every byte of open-ended arguments, a reply that does not
 * fit, the VPPU call's arguments and checks, and the VPPU calling it through
 * a daemon, whose statistics count it like any handler; a frame handler
 * that writes past its capacity or a broken header is contained and counted.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "demo/demo.h"
#include <qlink/channel.h>
#include <qlink/daemon.h>
#include <qlink/ring.h>
#include <qlink/rpc.h>
#include <qlink/vppu.h>

/* ---- rpc_increment ------------------------------------------------------ */

static void test_increment_id(void **state)
{
	const struct ql_rpc_function *f = ql_demo_increment_function();

	assert_int_equal(ql_rpc_fnv1a("rpc_increment"), 0x191b6322u);
	assert_int_equal(QL_DEMO_INCREMENT_ID, ql_rpc_fnv1a(QL_DEMO_INCREMENT_NAME));
	assert_string_equal(f->name, "rpc_increment");
	assert_int_equal(f->id, 0x191b6322u);
	assert_non_null(f->frame);
	assert_null(f->fn);
	assert_null(f->schema);
}

static struct ql_rpc_table *increment_table(void)
{
	struct ql_rpc_table *t;

	assert_int_equal(ql_rpc_table_create(4, &t), 0);
	assert_int_equal(ql_rpc_table_add(t, ql_demo_increment_function()), 0);
	return t;
}

/* CUDA-Q's test: "hello dispatcher", request_id 1, in a 256-byte slot; the
 * first 40 bytes of the reply its server sends. */
static void test_increment_golden(void **state)
{
	static const uint8_t req_head[40] = {
		0x52, 0x51, 0x55, 0x43, 0x22, 0x63, 0x1b, 0x19, 0x10, 0x00, 0x00, 0x00, 0x01, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x68, 0x65, 0x6c, 0x6c,
		0x6f, 0x20, 0x64, 0x69, 0x73, 0x70, 0x61, 0x74, 0x63, 0x68, 0x65, 0x72,
	};
	static const uint8_t resp_head[40] = {
		0x53, 0x51, 0x55, 0x43, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x69, 0x66, 0x6d, 0x6d,
		0x70, 0x21, 0x65, 0x6a, 0x74, 0x71, 0x62, 0x75, 0x64, 0x69, 0x66, 0x73,
	};
	struct ql_rpc_table *t = increment_table();
	uint8_t slot[256] = { 0 }, resp[256];
	struct ql_rpc_dispatch_info info;
	size_t len;

	memcpy(slot, req_head, sizeof(req_head));
	memset(resp, 0xcc, sizeof(resp));
	assert_int_equal(ql_rpc_dispatch(t, slot, sizeof(slot), resp, sizeof(resp), &len, &info),
			 0);
	assert_int_equal(len, 40);
	assert_memory_equal(resp, resp_head, sizeof(resp_head));
	assert_int_equal(info.kind, QL_RPC_ERR_NONE);
	ql_rpc_table_destroy(t);
}

/* Open-ended: any arg_len, every byte incremented (0xff wraps to 0). */
static void test_increment_bytes(void **state)
{
	static const uint32_t lens[] = { 0, 1, 7, 8, 9, 100, 232 };
	struct ql_rpc_table *t = increment_table();

	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		uint8_t slot[256] = { 0 }, resp[256];
		struct ql_rpc_header h = { QL_RPC_MAGIC_REQUEST, QL_DEMO_INCREMENT_ID, lens[k],
					   (uint32_t)k + 7, 0x1122334455667788ull };
		struct ql_rpc_response r;
		size_t len;

		ql_rpc_header_encode(slot, &h);
		for (uint32_t i = 0; i < lens[k]; i++)
			slot[24 + i] = (uint8_t)(i * 37 + 0xf0);
		assert_int_equal(
			ql_rpc_dispatch(t, slot, sizeof(slot), resp, sizeof(resp), &len, NULL), 0);
		ql_rpc_response_decode(resp, &r);
		assert_int_equal(len, 24 + lens[k]);
		assert_int_equal(r.result_len, lens[k]);
		assert_int_equal(r.request_id, (uint32_t)k + 7);
		assert_true(r.ptp_timestamp == 0x1122334455667788ull);
		for (uint32_t i = 0; i < lens[k]; i++)
			assert_int_equal(resp[24 + i], (uint8_t)(slot[24 + i] + 1));
	}
	ql_rpc_table_destroy(t);
}

/* A reply that does not fit the response capacity: an explicit status,
 * no results (never a silently short reply). */
static void test_increment_too_big(void **state)
{
	struct ql_rpc_table *t = increment_table();
	uint8_t slot[24 + 100] = { 0 }, resp[24 + 100];
	struct ql_rpc_header h = { QL_RPC_MAGIC_REQUEST, QL_DEMO_INCREMENT_ID, 100, 5, 6 };
	struct ql_rpc_dispatch_info info;
	size_t len;

	ql_rpc_header_encode(slot, &h);
	assert_int_equal(ql_rpc_dispatch(t, slot, sizeof(slot), resp, 24 + 99, &len, &info),
			 QL_RPC_E_RESULT_OVERFLOW);
	assert_int_equal(len, 24);
	assert_int_equal(info.kind, QL_RPC_ERR_HANDLER);
	assert_int_equal(ql_rpc_get_u32(resp + 12), 5);
	assert_int_equal(ql_rpc_dispatch(t, slot, sizeof(slot), resp, 24 + 100, &len, &info), 0);
	assert_int_equal(len, 24 + 100);
	ql_rpc_table_destroy(t);
}

/* The VPPU call: reproducible arguments, every reply byte checked. */
static void test_increment_call(void **state)
{
	struct ql_vppu_call c;
	uint8_t a[37], b[37], res[37];

	ql_demo_increment_call(&c, sizeof(a));
	assert_string_equal(c.function, "rpc_increment");
	assert_int_equal(c.arg_len, sizeof(a));
	c.make_args(c.ctx, 12, a);
	c.make_args(c.ctx, 12, b);
	assert_memory_equal(a, b, sizeof(a));
	c.make_args(c.ctx, 13, b);
	assert_memory_not_equal(a, b, sizeof(a));
	for (size_t i = 0; i < sizeof(a); i++)
		res[i] = (uint8_t)(a[i] + 1);
	assert_int_equal(c.check(c.ctx, 12, 0, res, sizeof(res)), 0);
	assert_int_not_equal(c.check(c.ctx, 13, 0, res, sizeof(res)), 0); /* another call's */
	assert_int_not_equal(c.check(c.ctx, 12, 1, res, sizeof(res)), 0);
	assert_int_not_equal(c.check(c.ctx, 12, 0, res, sizeof(res) - 1), 0);
	for (size_t i = 0; i < sizeof(res); i++) { /* any one wrong byte is seen */
		res[i] ^= 0x10;
		assert_int_not_equal(c.check(c.ctx, 12, 0, res, sizeof(res)), 0);
		res[i] ^= 0x10;
	}
	ql_demo_increment_call(&c, 0);
	assert_int_equal(c.check(c.ctx, 0, 0, res, 0), 0);
}

/* ---- through a daemon ---------------------------------------------------- */

/* A VPPU client over a loopback channel whose daemon answers in send(). */
#define FAKE_SLOTS 8
#define FAKE_SLOT_SIZE 256

struct fake {
	struct ql_channel *ch;
	struct ql_daemon *d;
	uint8_t buf[FAKE_SLOTS][FAKE_SLOT_SIZE];
	int next;
};

static int fake_send(void *cl, const void *msg, uint32_t len)
{
	struct fake *f = cl;
	int ret = ql_loop_channel_push(f->ch, msg, len, len);

	if (ret)
		return ret;
	return ql_daemon_poll(f->d) == 1 ? 0 : -EIO;
}

static int fake_poll(void *cl, struct ql_ring_response *out, int max)
{
	struct fake *f = cl;
	int k = 0;

	for (; k < max && k < FAKE_SLOTS; k++) {
		int len = ql_loop_channel_pop(f->ch, f->buf[f->next], FAKE_SLOT_SIZE);

		if (len < 0)
			break;
		out[k] = (struct ql_ring_response){ f->buf[f->next], (uint32_t)len, 0 };
		f->next = (f->next + 1) % FAKE_SLOTS;
	}
	return k;
}

static int fake_release(void *cl, const struct ql_ring_response *r)
{
	(void)cl;
	(void)r;
	return 0;
}

static uint32_t fake_max_msg(const void *cl)
{
	(void)cl;
	return FAKE_SLOT_SIZE - 16; /* a ring slot's header */
}

/* A frame handler gone wrong, as its first argument byte says: 0 writes
 * one byte past its capacity, 1 answers with the request's magic. */
static int32_t frame_bad(const uint8_t *req, size_t req_len, uint8_t *resp, size_t resp_cap,
			 void *ctx)
{
	(void)ctx;
	ql_rpc_frame_respond(req, resp, 0, 0);
	if (req_len > 24 && req[24] == 1)
		ql_rpc_put_u32(resp, QL_RPC_MAGIC_REQUEST);
	else
		resp[resp_cap] = 0;
	return 0;
}

static int find_function(struct ql_daemon *d, const char *name, struct ql_daemon_function_stats *fs)
{
	for (uint32_t i = 0; i < ql_daemon_function_count(d); i++)
		if (!ql_daemon_function_stats(d, i, fs) && !strcmp(fs->name, name))
			return 0;
	return -1;
}

static void test_daemon(void **state)
{
	struct ql_daemon_config dc = { .cpu = -1 };
	struct fake f = { 0 };
	struct ql_vppu_client c = { &f, fake_send, fake_poll, fake_release, fake_max_msg, NULL };
	struct ql_vppu_config cfg = { .window = 4, .count = 300 };
	struct ql_vppu_report rep;
	struct ql_vppu_call call;
	struct ql_daemon_stats st;
	struct ql_daemon_function_stats fs;
	uint8_t msg[32] = { 0 }, resp[FAKE_SLOT_SIZE];

	assert_int_equal(ql_loop_channel_create(FAKE_SLOTS, FAKE_SLOT_SIZE, &f.ch), 0);
	assert_int_equal(ql_daemon_create(&dc, f.ch, &f.d), 0);
	assert_int_equal(ql_daemon_register(f.d, ql_demo_parity_function()), 0);
	assert_int_equal(ql_daemon_register(f.d, ql_demo_increment_function()), 0);
	assert_int_equal(
		ql_daemon_register(f.d, &QL_RPC_FRAME_FUNCTION("frame_bad", frame_bad, NULL)), 0);

	ql_demo_increment_call(&call, 100);
	assert_int_equal(ql_vppu_run_client(&c, &call, &cfg, &rep), 0);
	assert_int_equal(rep.ok, 300);
	assert_int_equal(rep.wrong + rep.protocol_errors + rep.handler_errors + rep.lost, 0);
	ql_daemon_stats(f.d, &st);
	assert_int_equal(st.ok, 300);
	assert_int_equal(find_function(f.d, "rpc_increment", &fs), 0);
	assert_int_equal(fs.calls, 300);
	assert_int_equal(fs.errors, 0);

	/* the largest argument a 256-byte slot holds */
	ql_demo_increment_call(&call, FAKE_SLOT_SIZE - 16 - 24);
	cfg.count = 20;
	assert_int_equal(ql_vppu_run_client(&c, &call, &cfg, &rep), 0);
	assert_int_equal(rep.ok, 20);

	/* a frame handler writing past its capacity, then one with a broken
	 * header: both answered QL_RPC_E_INTERNAL and counted */
	for (uint8_t mode = 0; mode < 2; mode++) {
		struct ql_rpc_header h = { QL_RPC_MAGIC_REQUEST, ql_rpc_fnv1a("frame_bad"), 1, 9,
					   0 };
		struct ql_rpc_response r;

		ql_rpc_header_encode(msg, &h);
		msg[24] = mode;
		assert_int_equal(ql_loop_channel_push(f.ch, msg, 25, 25), 0);
		assert_int_equal(ql_daemon_poll(f.d), 1);
		assert_int_equal(ql_loop_channel_pop(f.ch, resp, sizeof(resp)), 24);
		ql_rpc_response_decode(resp, &r);
		assert_int_equal(r.status, QL_RPC_E_INTERNAL);
		assert_int_equal(r.request_id, 9);
	}
	ql_daemon_stats(f.d, &st);
	assert_int_equal(st.err_result_overrun, 1);
	assert_int_equal(st.err_internal, 1);
	assert_int_equal(find_function(f.d, "frame_bad", &fs), 0);
	assert_int_equal(fs.calls, 2);
	assert_int_equal(fs.errors, 2);
	assert_int_equal(fs.result_overruns, 1);

	/* and the daemon still serves */
	cfg.count = 10;
	assert_int_equal(ql_vppu_run_client(&c, &call, &cfg, &rep), 0);
	assert_int_equal(rep.ok, 10);
	ql_daemon_destroy(f.d);
	ql_channel_destroy(f.ch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_increment_id),	cmocka_unit_test(test_increment_golden),
		cmocka_unit_test(test_increment_bytes), cmocka_unit_test(test_increment_too_big),
		cmocka_unit_test(test_increment_call),	cmocka_unit_test(test_daemon),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
