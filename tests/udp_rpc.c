/* SPDX-License-Identifier: MIT */
/*
 * ql-udp-rpc: a CUDA-Q Realtime UDP caller against a qlinkd `udp:` listener,
 * for tests/qlinkd_udp.sh. Everything over one connect()ed socket with
 * full-stride datagrams, as CUDA-Q's caller sends them:
 *
 *   1. CUDA-Q's own rpc_increment request ("hello dispatcher", id 1): the
 *      first 40 bytes of the reply are the ones CUDA-Q's server sends;
 *   2. COUNT rpc_increment calls through the VPPU (window 4), arguments of
 *      16 bytes and of a whole stride, every reply byte checked;
 *   3. 100 qlink_parity calls (the built-ins share one registry);
 *   4. with --plugin: reverse_bytes (examples/plugin_host_call.c);
 *   5. a bad magic and an unknown function: no reply within 500 ms (drop),
 *      or with --answer their error statuses; then a good call answered
 *      (a dropped request stalls nothing);
 *   6. two datagrams one byte longer than the stride: no reply; then a good
 *      call answered.
 *
 * usage: ql-udp-rpc [--answer] [--plugin] HOST PORT SLOT_SIZE COUNT
 * Exit 0 when every check passed ("udp-rpc: ok ..."), 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo/demo.h"
#include <qlink/clock.h>
#include <qlink/error.h>
#include <qlink/rpc.h>
#include <qlink/udp.h>
#include <qlink/vppu.h>

static int failed;

#define CHECK(cond, ...)                                    \
	do {                                                \
		if (!(cond)) {                              \
			fprintf(stderr, "udp-rpc: FAIL: "); \
			fprintf(stderr, __VA_ARGS__);       \
			fputc('\n', stderr);                \
			failed = 1;                         \
		}                                           \
	} while (0)

/* Poll up to ms for one response; copy it (at most cap bytes). Its length,
 * or -1 when none came. */
static long wait_reply(struct ql_udp_client *cl, int ms, uint8_t *buf, size_t cap)
{
	uint64_t end = ql_clock_ns() + (uint64_t)ms * 1000000;
	struct ql_ring_response r;

	while (ql_clock_ns() < end) {
		int n = ql_udp_client_poll(cl, &r, 1);

		if (n == 1) {
			long len = (long)r.len;

			memcpy(buf, r.msg, r.len < cap ? r.len : cap);
			ql_udp_client_release(cl, &r);
			return len;
		}
	}
	return -1;
}

/* A request frame for function id with n argument bytes (i * 3 + seed). */
static uint32_t frame(uint8_t *buf, uint32_t magic, uint32_t id, uint32_t n, uint32_t rid)
{
	struct ql_rpc_header h = { magic, id, n, rid, 0x0102030405060708ull };

	ql_rpc_header_encode(buf, &h);
	for (uint32_t i = 0; i < n; i++)
		buf[24 + i] = (uint8_t)(i * 3 + rid);
	return 24 + n;
}

/* One good rpc_increment through the window, answered and right. */
static void good_call(struct ql_udp_client *cl, uint32_t rid, const char *after)
{
	uint8_t req[64], resp[65536];
	struct ql_rpc_response r;
	uint32_t len = frame(req, QL_RPC_MAGIC_REQUEST, QL_DEMO_INCREMENT_ID, 8, rid);
	long n;

	CHECK(ql_udp_client_send(cl, req, len) == 0, "send after %s", after);
	n = wait_reply(cl, 5000, resp, sizeof(resp));
	CHECK(n >= 32, "no answer to a good call after %s", after);
	if (n < 32)
		return;
	ql_rpc_response_decode(resp, &r);
	CHECK(r.status == 0 && r.request_id == rid && r.result_len == 8 &&
		      resp[24] == (uint8_t)(req[24] + 1),
	      "wrong answer after %s (status %d, id %u)", after, r.status, r.request_id);
}

/* A refused request: no reply (drop), or its status (answer). */
static void refused(struct ql_udp_client *cl, uint32_t stride, uint32_t magic, uint32_t id,
		    int answer, int32_t status, const char *what)
{
	uint8_t req[65536] = { 0 }, resp[65536];
	struct ql_rpc_response r;
	long n;

	frame(req, magic, id, 4, 77);
	CHECK(ql_udp_client_send_raw(cl, req, stride) == 0, "send %s", what);
	n = wait_reply(cl, 500, resp, sizeof(resp));
	if (!answer) {
		CHECK(n < 0, "%s answered (%ld bytes) under bad_requests: drop", what, n);
		return;
	}
	CHECK(n >= 24, "%s not answered under bad_requests: answer", what);
	if (n < 24)
		return;
	ql_rpc_response_decode(resp, &r);
	CHECK(r.status == status && r.request_id == 77, "%s: status %d, want %d", what, r.status,
	      status);
}

static void vppu(struct ql_udp_client *cl, const struct ql_vppu_call *call, uint64_t count,
		 const char *what)
{
	struct ql_vppu_client c;
	struct ql_vppu_config cfg = { .window = 4, .count = count, .timeout_ns = 5000000000ull };
	struct ql_vppu_report rep;
	int ret;

	ql_vppu_client_udp(&c, cl);
	ret = ql_vppu_run_client(&c, call, &cfg, &rep);
	CHECK(ret == 0, "%s: vppu run: %s", what, ql_strerror(ret));
	CHECK(rep.ok == count && !rep.wrong && !rep.handler_errors && !rep.protocol_errors &&
		      !rep.timeouts && !rep.lost && !rep.unexpected,
	      "%s: calls %" PRIu64 " ok %" PRIu64 " wrong %" PRIu64 " protocol_errors %" PRIu64
	      " timeouts %" PRIu64 " lost %" PRIu64 " unexpected %" PRIu64,
	      what, count, rep.ok, rep.wrong, rep.protocol_errors, rep.timeouts, rep.lost,
	      rep.unexpected);
	printf("udp-rpc: %s: %" PRIu64 " calls ok, p50 %.1f us\n", what, rep.ok,
	       ql_hist_count(&rep.rtt_ns) ? ql_hist_percentile(&rep.rtt_ns, 50) / 1000 : 0.0);
}

int main(int argc, char **argv)
{
	static const uint8_t golden_req[40] = {
		0x52, 0x51, 0x55, 0x43, 0x22, 0x63, 0x1b, 0x19, 0x10, 0x00, 0x00, 0x00, 0x01, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x68, 0x65, 0x6c, 0x6c,
		0x6f, 0x20, 0x64, 0x69, 0x73, 0x70, 0x61, 0x74, 0x63, 0x68, 0x65, 0x72,
	};
	static const uint8_t golden_resp[40] = {
		0x53, 0x51, 0x55, 0x43, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x69, 0x66, 0x6d, 0x6d,
		0x70, 0x21, 0x65, 0x6a, 0x74, 0x71, 0x62, 0x75, 0x64, 0x69, 0x66, 0x73,
	};
	struct ql_udp_client_config cc = { 0 };
	struct ql_udp_client *cl;
	struct ql_vppu_call call;
	uint8_t buf[65536], resp[65536];
	uint64_t count, seed = 42;
	int answer = 0, plugin = 0, i = 1, ret;
	long n;

	for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
		if (!strcmp(argv[i], "--answer"))
			answer = 1;
		else if (!strcmp(argv[i], "--plugin"))
			plugin = 1;
		else
			break;
	}
	if (argc - i != 4) {
		fprintf(stderr,
			"usage: ql-udp-rpc [--answer] [--plugin] HOST PORT SLOT_SIZE COUNT\n");
		return 2;
	}
	cc.host = argv[i];
	cc.port = (uint16_t)atoi(argv[i + 1]);
	cc.slot_size = (uint32_t)atoi(argv[i + 2]);
	cc.window = 4;
	count = strtoull(argv[i + 3], NULL, 10);
	if (cc.slot_size < 64 || cc.slot_size > sizeof(buf) - 1) {
		fprintf(stderr, "ql-udp-rpc: SLOT_SIZE 64..65535\n");
		return 2;
	}
	ret = ql_udp_client_create(&cc, &cl);
	if (ret) {
		fprintf(stderr, "ql-udp-rpc: %s\n", ql_error_detail());
		return 1;
	}

	/* 1. CUDA-Q's bytes */
	CHECK(ql_udp_client_send(cl, golden_req, sizeof(golden_req)) == 0, "send golden");
	n = wait_reply(cl, 5000, resp, sizeof(resp));
	CHECK(n >= 40 && n <= (long)cc.slot_size, "golden: reply of %ld bytes", n);
	CHECK(n >= 40 && !memcmp(resp, golden_resp, sizeof(golden_resp)),
	      "golden: the reply is not CUDA-Q's");

	/* 2., 3. */
	ql_demo_increment_call(&call, 16);
	vppu(cl, &call, count, "rpc_increment 16 bytes");
	ql_demo_increment_call(&call, cc.slot_size - 24);
	vppu(cl, &call, count / 4 + 1, "rpc_increment a whole stride");
	ql_demo_parity_call(&call, &seed);
	vppu(cl, &call, 100, "qlink_parity");

	/* 4. a plugin's frame handler */
	if (plugin) {
		uint32_t len =
			frame(buf, QL_RPC_MAGIC_REQUEST, ql_rpc_fnv1a("reverse_bytes"), 5, 3);

		CHECK(ql_udp_client_send(cl, buf, len) == 0, "send reverse_bytes");
		n = wait_reply(cl, 5000, resp, sizeof(resp));
		CHECK(n >= 29 && ql_rpc_get_u32(resp + 8) == 5 && resp[24] == buf[28] &&
			      resp[28] == buf[24],
		      "reverse_bytes: no or a wrong answer");
	}

	/* 5. refused requests, then a good one */
	refused(cl, cc.slot_size, 0xdeadbeef, QL_DEMO_INCREMENT_ID, answer, QL_RPC_E_BAD_MAGIC,
		"bad magic");
	refused(cl, cc.slot_size, QL_RPC_MAGIC_REQUEST, 0xb18ae409, answer,
		QL_RPC_E_UNKNOWN_FUNCTION, "unknown function");
	good_call(cl, 1000, "refused requests");

	/* 6. longer than the stride: dropped by the channel whatever the policy */
	memset(buf, 0, sizeof(buf));
	frame(buf, QL_RPC_MAGIC_REQUEST, QL_DEMO_INCREMENT_ID, 8, 2000);
	for (int k = 0; k < 2; k++) {
		CHECK(ql_udp_client_send_raw(cl, buf, cc.slot_size + 1) == 0, "send oversize");
		n = wait_reply(cl, 500, resp, sizeof(resp));
		CHECK(n < 0, "an oversize datagram was answered");
	}
	good_call(cl, 1001, "oversize datagrams");

	ql_udp_client_destroy(cl);
	if (failed)
		return 1;
	printf("udp-rpc: ok %s:%u stride %u policy %s\n", cc.host, cc.port, cc.slot_size,
	       answer ? "answer" : "drop");
	return 0;
}
