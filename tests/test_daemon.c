/* SPDX-License-Identifier: MIT */
/*
 * The daemon over the loopback channel: typed and raw handlers, every kind
 * of bad request (answered, counted, never fatal), wrap-around and flow
 * control, start/stop/restart with requests in flight, random garbage, and
 * the dispatch path with no allocation, lock or system call.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "echo_daemon.h"

#include "demo/demo.h"
#include <qlink/channel.h>
#include <qlink/clock.h>
#include <qlink/daemon.h>
#include <qlink/ring.h>
#include <qlink/rpc.h>

#include "hotpath.h"

#define SLOTS 16
#define SLOT_SIZE 128 /* 112 bytes of message, 88 of arguments */

struct fixture {
	struct ql_channel *ch;
	struct ql_daemon *d;
	uint8_t resp[SLOT_SIZE];
};

/* raw handlers for the error cases */
static int32_t h_fail7(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)in;
	(void)out;
	(void)ctx;
	return 7;
}

static int32_t h_negative(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)in;
	(void)out;
	(void)ctx;
	return -3;
}

static int32_t h_flood(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	uint8_t junk[256] = { 0 };

	(void)in;
	(void)ctx;
	ql_rpc_write_bytes(out, junk, sizeof(junk)); /* more than a slot holds */
	return 0;
}

static int setup(void **state)
{
	struct ql_daemon_config cfg = { .cpu = -1 };
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || ql_loop_channel_create(SLOTS, SLOT_SIZE, &f->ch) ||
	    ql_daemon_create(&cfg, f->ch, &f->d))
		return -1;
	if (ql_daemon_register(f->d, ql_demo_parity_function()) ||
	    ql_daemon_register(f->d, &QL_RPC_RAW_FUNCTION("fail7", h_fail7, NULL)) ||
	    ql_daemon_register(f->d, &QL_RPC_RAW_FUNCTION("negative", h_negative, NULL)) ||
	    ql_daemon_register(f->d, &QL_RPC_RAW_FUNCTION("flood", h_flood, NULL)) ||
	    ql_daemon_register(f->d, &QL_RPC_RAW_FUNCTION("echo", ql_test_echo, NULL)))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ql_daemon_destroy(f->d);
	ql_channel_destroy(f->ch);
	free(f);
	return 0;
}

static uint32_t make_req(uint8_t *buf, const char *fn, uint32_t req_id, const void *args,
			 uint32_t arg_len)
{
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = ql_rpc_fnv1a(fn),
		.arg_len = arg_len,
		.request_id = req_id,
		.ptp_timestamp = 0x1122334455667788ull ^ req_id,
	};

	ql_rpc_header_encode(buf, &h);
	memcpy(buf + QL_RPC_HEADER_SIZE, args, arg_len);
	return QL_RPC_HEADER_SIZE + arg_len;
}

/* Push one raw slot, serve it, return the response header. */
static int call_raw(struct fixture *f, const void *msg, uint32_t len, uint32_t bytes,
		    struct ql_rpc_response *r)
{
	int n;

	assert_int_equal(ql_loop_channel_push(f->ch, msg, len, bytes), 0);
	assert_int_equal(ql_daemon_poll(f->d), 1);
	n = ql_loop_channel_pop(f->ch, f->resp, sizeof(f->resp));
	assert_true(n >= (int)QL_RPC_RESPONSE_SIZE);
	ql_rpc_response_decode(f->resp, r);
	assert_int_equal(r->magic, QL_RPC_MAGIC_RESPONSE);
	assert_int_equal((uint32_t)n, QL_RPC_RESPONSE_SIZE + r->result_len);
	return n;
}

static void test_parity(void **state)
{
	struct fixture *f = *state;
	uint8_t msg[SLOT_SIZE], syn[QL_DEMO_PARITY_ARG_LEN] = { 0 };
	struct ql_rpc_response r;
	struct ql_daemon_stats st;
	struct ql_daemon_function_stats fs;
	uint32_t len;

	syn[0] = 0x01;
	syn[31] = 0x80;
	syn[7] = 0x07;
	len = make_req(msg, QL_DEMO_PARITY_NAME, 42, syn, sizeof(syn));
	call_raw(f, msg, len, len, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.result_len, 5);
	assert_int_equal(r.request_id, 42);
	assert_int_equal(r.ptp_timestamp, 0x1122334455667788ull ^ 42);
	assert_int_equal(f->resp[24], 1);		   /* 5 events: odd */
	assert_int_equal(ql_rpc_get_i32(f->resp + 25), 5); /* weight */
	ql_daemon_stats(f->d, &st);
	assert_int_equal(st.requests, 1);
	assert_int_equal(st.responses, 1);
	assert_int_equal(st.ok, 1);
	assert_int_equal(ql_daemon_function_count(f->d), 5);
	assert_int_equal(ql_daemon_function_stats(f->d, 0, &fs), 0);
	assert_string_equal(fs.name, QL_DEMO_PARITY_NAME);
	assert_int_equal(fs.id, 0x90aa3e50);
	assert_int_equal(fs.calls, 1);
	assert_int_equal(ql_daemon_function_stats(f->d, 99, &fs), -EINVAL);
}

/* Every bad request gets a response with the right status, is counted,
 * and the daemon keeps serving. */
static void test_bad_requests(void **state)
{
	struct fixture *f = *state;
	uint8_t msg[SLOT_SIZE], syn[QL_DEMO_PARITY_ARG_LEN + 8] = { 0 };
	struct ql_rpc_response r;
	struct ql_daemon_stats st;
	uint32_t len;

	/* shorter than a header: echoes zeros */
	memset(msg, 0xab, sizeof(msg));
	call_raw(f, msg, 10, 10, &r);
	assert_int_equal(r.status, QL_RPC_E_SHORT);
	assert_int_equal(r.request_id, 0);
	/* bad magic, ids echoed */
	len = make_req(msg, "echo", 5, syn, 4);
	msg[0] ^= 0xff;
	call_raw(f, msg, len, len, &r);
	assert_int_equal(r.status, QL_RPC_E_BAD_MAGIC);
	assert_int_equal(r.request_id, 5);
	/* arg_len beyond the slot, and beyond the length field */
	len = make_req(msg, "echo", 6, syn, 8);
	ql_rpc_put_u32(msg + 8, 1000);
	call_raw(f, msg, len, len, &r);
	assert_int_equal(r.status, QL_RPC_E_BAD_LENGTH);
	len = make_req(msg, "echo", 7, syn, 8);
	call_raw(f, msg, 0xffffffffu, len, &r);		 /* length field says more than the slot */
	assert_int_equal(r.status, QL_RPC_E_BAD_LENGTH); /* never cut to the slot */
	assert_int_equal(r.request_id, 7);
	len = make_req(msg, "echo", 8, syn, 8);
	call_raw(f, msg, len - 4, len, &r); /* length field says less than arg_len */
	assert_int_equal(r.status, QL_RPC_E_BAD_LENGTH);
	/* arguments shorter and longer than the schema */
	len = make_req(msg, QL_DEMO_PARITY_NAME, 9, syn, QL_DEMO_PARITY_ARG_LEN - 1);
	call_raw(f, msg, len, len, &r);
	assert_int_equal(r.status, QL_RPC_E_ARGS_MISMATCH);
	len = make_req(msg, QL_DEMO_PARITY_NAME, 10, syn, QL_DEMO_PARITY_ARG_LEN + 8);
	call_raw(f, msg, len, len, &r);
	assert_int_equal(r.status, QL_RPC_E_ARGS_MISMATCH);
	/* unknown function */
	len = make_req(msg, "no_such_function", 11, syn, 0);
	call_raw(f, msg, len, len, &r);
	assert_int_equal(r.status, QL_RPC_E_UNKNOWN_FUNCTION);
	assert_int_equal(r.request_id, 11);
	/* handler errors */
	len = make_req(msg, "fail7", 12, syn, 0);
	call_raw(f, msg, len, len, &r);
	assert_int_equal(r.status, 7);
	assert_int_equal(r.result_len, 0);
	len = make_req(msg, "negative", 13, syn, 0);
	call_raw(f, msg, len, len, &r);
	assert_int_equal(r.status, QL_RPC_E_INTERNAL);
	len = make_req(msg, "flood", 14, syn, 0);
	call_raw(f, msg, len, len, &r);
	assert_int_equal(r.status, QL_RPC_E_RESULT_OVERFLOW);
	/* and it still serves */
	len = make_req(msg, "echo", 15, "hello", 5);
	call_raw(f, msg, len, len, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.result_len, 5);
	assert_memory_equal(f->resp + 24, "hello", 5);

	ql_daemon_stats(f->d, &st);
	assert_int_equal(st.requests, 12);
	assert_int_equal(st.responses, 12);
	assert_int_equal(st.err_short, 1);
	assert_int_equal(st.err_bad_magic, 1);
	assert_int_equal(st.err_bad_length, 3);
	assert_int_equal(st.err_args, 2);
	assert_int_equal(st.err_unknown_function, 1);
	assert_int_equal(st.handler_error, 1);
	assert_int_equal(st.err_internal, 1);
	assert_int_equal(st.err_result_overflow, 1);
	assert_int_equal(st.ok, 1);
}

/* Many laps of the ring with the window always full. */
static void test_wrap_and_window(void **state)
{
	struct fixture *f = *state;
	uint8_t msg[SLOT_SIZE];
	uint64_t pushed = 0, answered = 0;

	while (answered < SLOTS * 100) {
		uint32_t len;
		int n;

		for (;;) {
			uint32_t v = (uint32_t)pushed;

			len = make_req(msg, "echo", (uint32_t)pushed, &v, 4);
			n = ql_loop_channel_push(f->ch, msg, len, len);
			if (n == -EAGAIN)
				break;
			assert_int_equal(n, 0);
			pushed++;
		}
		assert_int_equal(pushed - answered, SLOTS);
		assert_true(ql_daemon_poll(f->d) > 0);
		while ((n = ql_loop_channel_pop(f->ch, f->resp, sizeof(f->resp))) > 0) {
			struct ql_rpc_response r;

			ql_rpc_response_decode(f->resp, &r);
			assert_int_equal(r.status, 0);
			assert_int_equal(r.request_id, (uint32_t)answered);
			assert_int_equal(ql_rpc_get_u32(f->resp + 24), (uint32_t)answered);
			answered++;
		}
	}
}

/* The dispatcher thread: stop with requests waiting, restart, nothing lost
 * or answered twice. */
static void test_start_stop_restart(void **state)
{
	struct fixture *f = *state;
	uint8_t msg[SLOT_SIZE];
	uint64_t pushed = 0, answered = 0, total = 20000;
	uint64_t deadline = ql_clock_ns() + 20ull * 1000000000ull;
	struct ql_daemon_stats st;
	int phase = 0;

	assert_int_equal(ql_daemon_start(f->d), 0);
	assert_int_equal(ql_daemon_start(f->d), -EALREADY);
	assert_int_equal(ql_daemon_register(f->d, &QL_RPC_RAW_FUNCTION("late", ql_test_echo, NULL)),
			 -EBUSY);
	while (answered < total) {
		int n;

		assert_true(ql_clock_ns() < deadline);
		if (pushed < total) {
			uint32_t len = make_req(msg, "echo", (uint32_t)pushed, &pushed, 8);

			if (ql_loop_channel_push(f->ch, msg, len, len) == 0)
				pushed++;
		}
		/* the loop channel is single-threaded on the client side: pop
		 * is ours, the dispatcher only appends */
		n = ql_loop_channel_pop(f->ch, f->resp, sizeof(f->resp));
		if (n > 0) {
			struct ql_rpc_response r;

			ql_rpc_response_decode(f->resp, &r);
			assert_int_equal(r.request_id, (uint32_t)answered);
			answered++;
		}
		if (phase == 0 && answered > total / 3) {
			assert_int_equal(ql_daemon_stop(f->d), 0);
			ql_daemon_stats(f->d, &st);
			assert_int_equal(st.running, 0);
			phase = 1;
		} else if (phase == 1 && pushed >= answered + SLOTS) {
			/* requests waited in the ring while stopped */
			assert_int_equal(ql_daemon_start(f->d), 0);
			phase = 2;
		}
	}
	assert_int_equal(ql_daemon_stop(f->d), 0);
	assert_int_equal(ql_daemon_stop(f->d), 0);
	ql_daemon_stats(f->d, &st);
	assert_int_equal(st.requests, total);
	assert_int_equal(st.responses, total);
	assert_int_equal(st.ok, total);
	assert_int_equal(ql_loop_channel_pop(f->ch, f->resp, sizeof(f->resp)), -EAGAIN);
}

/* Random bytes in the slots, random length fields: every slot answered,
 * every answer counted under one outcome. */
static void test_garbage(void **state)
{
	struct fixture *f = *state;
	uint8_t msg[SLOT_SIZE];
	struct ql_daemon_stats st;
	uint64_t x = 0x243f6a8885a308d3ull, sum;
	const int total = 100000;

	for (int i = 0; i < total; i++) {
		uint32_t len;
		int n;

		for (size_t k = 0; k < sizeof(msg); k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			msg[k] = (uint8_t)x;
		}
		/* sometimes a valid header with a random body, random lengths */
		if (i % 3 == 0) {
			uint8_t args[SLOT_SIZE];

			memcpy(args, msg, sizeof(args));
			make_req(msg, i % 2 ? "echo" : QL_DEMO_PARITY_NAME, (uint32_t)i, args,
				 (uint32_t)(x % (SLOT_SIZE - 16 - 24 + 1)));
		}
		len = (i % 5 == 0) ? (uint32_t)x : (uint32_t)(x % (SLOT_SIZE - 16 + 1));
		assert_int_equal(ql_loop_channel_push(f->ch, msg, len, SLOT_SIZE - 16), 0);
		assert_int_equal(ql_daemon_poll(f->d), 1);
		n = ql_loop_channel_pop(f->ch, f->resp, sizeof(f->resp));
		assert_true(n >= (int)QL_RPC_RESPONSE_SIZE);
	}
	ql_daemon_stats(f->d, &st);
	assert_int_equal(st.requests, total);
	assert_int_equal(st.responses, total);
	sum = st.ok + st.handler_error + st.err_short + st.err_bad_magic + st.err_bad_length +
	      st.err_unknown_function + st.err_args + st.err_result_overflow + st.err_internal;
	assert_int_equal(sum, total);
	assert_true(st.ok > 0);
	assert_true(st.err_bad_magic > 0);
}

/* Serving a request touches no allocator, no lock, no system call. */
static int serve_many(void *arg)
{
	struct fixture *f = arg;
	uint8_t msg[SLOT_SIZE], syn[QL_DEMO_PARITY_ARG_LEN];

	for (uint64_t i = 0; i < 1000000; i++) {
		uint32_t len;

		ql_demo_parity_syndrome(1, i, syn);
		len = make_req(msg, QL_DEMO_PARITY_NAME, (uint32_t)i, syn, sizeof(syn));
		if (ql_loop_channel_push(f->ch, msg, len, len) || ql_daemon_poll(f->d) != 1 ||
		    ql_loop_channel_pop(f->ch, f->resp, sizeof(f->resp)) != 24 + 5 ||
		    ql_rpc_get_i32(f->resp + 4) != 0)
			return -1;
	}
	return 0;
}

static void test_hot_path(void **state)
{
	struct fixture *f = *state;
	char why[160];

	if (hp_check(serve_many, f, why, sizeof(why)))
		fail_msg("%s: %s", "1M requests", why);
}

/* The worked example of docs/wire-protocol.md, byte for byte. */
static void test_wire_protocol_example(void **state)
{
	static const uint8_t want_req[64] = {
		0x38, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* len 56, reserved */
		0x52, 0x51, 0x55, 0x43, 0x50, 0x3e, 0xaa, 0x90, /* CUQR, fnv1a */
		0x20, 0x00, 0x00, 0x00, 0x46, 0x00, 0x00, 0x00, /* arg_len, request_id */
		0x05, 0x04, 0x03, 0x02, 0x01, 0x00, 0x00, 0x00, /* ptp_timestamp */
		0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
	};
	static const uint8_t want_resp[29] = {
		0x53, 0x51, 0x55, 0x43, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00,
		0x00, 0x00, 0x46, 0x00, 0x00, 0x00, 0x05, 0x04, 0x03, 0x02,
		0x01, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
	};
	struct fixture *f = *state;
	uint8_t slot[64] = { 0 }, syn[QL_DEMO_PARITY_ARG_LEN] = { 0 };
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = ql_rpc_fnv1a(QL_DEMO_PARITY_NAME),
		.arg_len = sizeof(syn),
		.request_id = 70,
		.ptp_timestamp = 0x0000000102030405ull,
	};
	struct ql_rpc_response r;
	uint32_t len = QL_RPC_HEADER_SIZE + sizeof(syn);

	ql_rpc_bit_set(syn, 0, 1);
	ql_rpc_bit_set(syn, 255, 1);
	memcpy(slot, &len, 4);
	ql_rpc_header_encode(slot + 8, &h);
	memcpy(slot + 32, syn, sizeof(syn));
	assert_memory_equal(slot, want_req, sizeof(want_req));
	/* slot 70 mod 64 = 6 at vaddr + 0x640 */
	assert_int_equal(ql_ring_slot_offset(64, 256, 70), 0x640);
	assert_int_equal(call_raw(f, slot + 8, len, len, &r), (int)sizeof(want_resp));
	assert_memory_equal(f->resp, want_resp, sizeof(want_resp));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_parity, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wire_protocol_example, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrap_and_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_start_stop_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hot_path, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
