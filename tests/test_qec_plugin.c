/* SPDX-License-Identifier: MIT */
/*
 * The QEC decoder plugin (qlink-qec.so) as qlinkd loads it, driven through
 * the RPC dispatcher with whole request frames, as they arrive from a QCS:
 * - configurations it must refuse at load;
 * - hostile payloads: every wrong length of the three functions, huge and
 *   negative syndrome counts, a mapping id, unknown decoder ids (negative,
 *   past 31, 2^40), the wrong number of syndromes, counters out of order
 *   (skipped, repeated, past the final round), corrections asked before
 *   the shot is complete or more than the one observable, a reply slot
 *   too small: each answered with CUDA-QX's status, and the decoder still
 *   serves the next good shot;
 * - the corrections of real shots equal the decoder's own (measurement
 *   outcomes and detection events as input), sessions share no state;
 * - a shot through the handlers allocates nothing, takes no lock and makes
 *   no system call.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "hotpath.h"
#include "plugin/loader.h"
#include "qlink/channel.h"
#include "qlink/daemon.h"
#include "qlink/qec.h"
#include "qlink/qec_wire.h"
#include "qlink/rpc.h"
#include "qlink/udp.h"

#define CONFIG                                                    \
	"id=0 distance=3 rounds=2 p=0.03;"                        \
	"id=5 distance=5 rounds=3 p=0.02 q=0.01 input=detectors;" \
	"id=7 distance=3 noise=code_capacity p=0.05"

struct fx {
	struct ql_plugin *plugin;
	struct ql_rpc_table *t, *t2;
	uint8_t msg[512], resp[512];
	uint32_t rid;
};

static struct fx F;

/* The decoder is real (not a stub that refuses every round). */
static bool decoder_works(void)
{
	struct ql_qec_params p = {
		.distance = 3, .rounds = 1, .noise = QL_QEC_PHENOMENOLOGICAL, .p = 0.01, .q = 0.01
	};
	struct ql_qec_code *c;
	struct ql_qec_decoder *d;
	uint8_t f[8] = { 0 };
	int ret;

	assert_int_equal(ql_qec_code_create(3, &c), 0);
	assert_int_equal(ql_qec_decoder_create(c, &p, NULL, &d), 0);
	ret = ql_qec_decoder_push(d, f);
	ql_qec_decoder_destroy(d);
	ql_qec_code_destroy(c);
	return ret != -ENOSYS;
}

#define NEED_DECODER()                                                                \
	do {                                                                          \
		if (!decoder_works()) {                                               \
			print_message("the union-find decoder is a stub: skipped\n"); \
			skip();                                                       \
		}                                                                     \
	} while (0)

static int setup(void **state)
{
	(void)state;
	memset(&F, 0, sizeof(F));
	if (ql_plugin_load(QL_TEST_QEC_PLUGIN, CONFIG, &F.plugin))
		return -1;
	if (ql_rpc_table_create(16, &F.t) || ql_rpc_table_create(16, &F.t2))
		return -1;
	if (ql_plugin_register_table(F.plugin, F.t) || ql_plugin_register_table(F.plugin, F.t2))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ql_rpc_table_destroy(F.t);
	ql_rpc_table_destroy(F.t2);
	ql_plugin_unload(F.plugin);
	return 0;
}

/* Dispatch fid(args) on table t with a reply room of resp_cap; the
 * status, and the result length in *rlen. */
static int32_t call_on(struct ql_rpc_table *t, uint32_t fid, const uint8_t *args, uint32_t arg_len,
		       size_t resp_cap, uint32_t *rlen)
{
	struct ql_rpc_header h = { .magic = QL_RPC_MAGIC_REQUEST,
				   .function_id = fid,
				   .arg_len = arg_len,
				   .request_id = ++F.rid,
				   .ptp_timestamp = 0x1122334455667788ull };
	struct ql_rpc_response r;
	size_t len;
	int32_t st;

	assert_true(QL_RPC_HEADER_SIZE + arg_len <= sizeof(F.msg));
	ql_rpc_header_encode(F.msg, &h);
	if (arg_len)
		memcpy(F.msg + QL_RPC_HEADER_SIZE, args, arg_len);
	st = ql_rpc_dispatch(t, F.msg, QL_RPC_HEADER_SIZE + arg_len, F.resp, resp_cap, &len, NULL);
	ql_rpc_response_decode(F.resp, &r);
	assert_int_equal(r.magic, QL_RPC_MAGIC_RESPONSE);
	assert_int_equal(r.request_id, F.rid);
	assert_true(r.ptp_timestamp == h.ptp_timestamp);
	assert_int_equal(r.status, st);
	assert_int_equal(len, QL_RPC_RESPONSE_SIZE + r.result_len);
	if (st)
		assert_int_equal(r.result_len, 0);
	if (rlen)
		*rlen = r.result_len;
	return st;
}

static int32_t call(uint32_t fid, const uint8_t *args, uint32_t arg_len, uint32_t *rlen)
{
	return call_on(F.t, fid, args, arg_len, sizeof(F.resp), rlen);
}

static int32_t enqueue_on(struct ql_rpc_table *t, int64_t id, int64_t counter, const uint8_t *bits,
			  uint64_t nbits)
{
	uint8_t a[256];
	int len = ql_qec_enqueue_encode(a, sizeof(a), id, counter, bits, nbits);

	assert_true(len > 0);
	return call_on(t, QL_QEC_FN_ENQUEUE_SYNDROMES, a, (uint32_t)len, sizeof(F.resp), NULL);
}

static int32_t enqueue(int64_t id, int64_t counter, const uint8_t *bits, uint64_t nbits)
{
	return enqueue_on(F.t, id, counter, bits, nbits);
}

/* get_corrections(id, n, reset): status; *flip = bit 0 of the answer. */
static int32_t corrections_on(struct ql_rpc_table *t, int64_t id, int64_t n, uint8_t reset,
			      uint8_t *flip)
{
	uint8_t a[17];
	uint32_t rlen;
	int32_t st;

	ql_qec_get_corrections_encode(a, id, n, reset);
	st = call_on(t, QL_QEC_FN_GET_CORRECTIONS, a, 17, sizeof(F.resp), &rlen);
	if (!st) {
		assert_int_equal(rlen, ql_qec_corrections_len((uint64_t)n));
		for (uint32_t i = 1; i < rlen; i++)
			assert_int_equal(F.resp[QL_RPC_RESPONSE_SIZE + i], 0);
		if (flip)
			*flip = n ? F.resp[QL_RPC_RESPONSE_SIZE] : 0;
	}
	return st;
}

static int32_t reset(int64_t id)
{
	uint8_t a[8];

	ql_qec_reset_encode(a, id);
	return call(QL_QEC_FN_RESET_DECODER, a, 8, NULL);
}

static void test_load_refusals(void **state)
{
	struct ql_plugin *p = NULL;

	(void)state;
	assert_int_equal(ql_plugin_load(QL_TEST_QEC_PLUGIN, NULL, &p), -EINVAL);
	assert_int_equal(ql_plugin_load(QL_TEST_QEC_PLUGIN, "id=0 d=4", &p), -EINVAL);
	assert_int_equal(ql_plugin_load(QL_TEST_QEC_PLUGIN, "id=0 d=3 window=0 colour=1", &p),
			 -EINVAL);
	assert_null(p);
	assert_int_equal(ql_plugin_load(QL_TEST_QEC_PLUGIN, "id=0 d=3", &p), 0);
	assert_string_equal(ql_plugin_get_info(p)->name, "qec");
	ql_plugin_unload(p);
}

static void test_wrong_lengths(void **state)
{
	uint8_t a[64] = { 0 };

	(void)state;
	for (uint32_t n = 0; n < 32; n++)
		assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, n, NULL), QL_QEC_E_ARG_LEN);
	for (uint32_t n = 0; n < 64; n++)
		if (n != 17)
			assert_int_equal(call(QL_QEC_FN_GET_CORRECTIONS, a, n, NULL),
					 QL_QEC_E_ARG_LEN);
	for (uint32_t n = 0; n < 64; n++)
		if (n != 8)
			assert_int_equal(call(QL_QEC_FN_RESET_DECODER, a, n, NULL),
					 QL_QEC_E_ARG_LEN);
	/* 4 syndromes in 40 bytes, sent in 41 or 48 */
	ql_rpc_put_i64(a + 24, 4);
	assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, 40, NULL),
			 decoder_works() ? QL_QEC_OK : QL_QEC_E_DECODER);
	assert_int_equal(reset(0), 0);
	assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, 41, NULL), QL_QEC_E_INVALID);
	assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, 48, NULL), QL_QEC_E_INVALID);
}

static void test_huge_and_negative(void **state)
{
	uint8_t a[40] = { 0 };

	(void)state;
	ql_rpc_put_i64(a + 24, (int64_t)1 << 40);
	assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, 40, NULL), QL_QEC_E_TOO_LARGE);
	ql_rpc_put_i64(a + 24, INT64_MAX);
	assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, 40, NULL), QL_QEC_E_TOO_LARGE);
	ql_rpc_put_i64(a + 24, -8);
	assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, 32, NULL), QL_QEC_E_INVALID);
	ql_rpc_put_i64(a + 24, INT64_MIN);
	assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, 40, NULL), QL_QEC_E_INVALID);
	ql_rpc_put_i64(a + 24, 4);
	ql_rpc_put_i64(a + 16, 9); /* syndrome_mapping_id */
	assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, 40, NULL), QL_QEC_E_INVALID);
	/* get_corrections: negative and huge return sizes */
	assert_int_equal(corrections_on(F.t, 0, -1, 0, NULL), QL_QEC_E_INVALID);
	assert_int_equal(corrections_on(F.t, 0, INT64_MAX, 0, NULL), QL_QEC_E_INVALID);
	assert_int_equal(corrections_on(F.t, 0, 2, 0, NULL), QL_QEC_E_INVALID);
}

static void test_unknown_ids(void **state)
{
	static const int64_t ids[] = { 1,  4,  6,	  31,	     32,
				       33, -1, INT64_MIN, INT64_MAX, (int64_t)1 << 40 };
	uint8_t zero[8] = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		assert_int_equal(enqueue(ids[i], 0, zero, 4), QL_QEC_E_DECODER);
		assert_int_equal(corrections_on(F.t, ids[i], 1, 1, NULL), QL_QEC_E_DECODER);
		assert_int_equal(reset(ids[i]), QL_QEC_E_DECODER);
	}
	/* configured ids answer */
	assert_int_equal(reset(0), 0);
	assert_int_equal(reset(5), 0);
	assert_int_equal(reset(7), 0);
}

static void test_wrong_count(void **state)
{
	uint8_t bits[8] = { 0 };

	(void)state;
	assert_int_equal(reset(0), 0);
	/* d = 3 has 4 detectors per round; d = 5 has 12 */
	assert_int_equal(enqueue(0, 0, bits, 0), QL_QEC_E_INVALID);
	assert_int_equal(enqueue(0, 0, bits, 3), QL_QEC_E_INVALID);
	assert_int_equal(enqueue(0, 0, bits, 5), QL_QEC_E_INVALID);
	assert_int_equal(enqueue(0, 0, bits, 9), QL_QEC_E_INVALID); /* d*d data bits */
	assert_int_equal(enqueue(5, 0, bits, 4), QL_QEC_E_INVALID);
}

/* One shot of decoder 0 (d = 3, 2 rounds) with no events: 3 frames. */
static void good_shot(struct ql_rpc_table *t)
{
	uint8_t z[1] = { 0 }, flip = 9;

	assert_int_equal(enqueue_on(t, 0, 0, z, 4), 0);
	assert_int_equal(enqueue_on(t, 0, 1, z, 4), 0);
	assert_int_equal(enqueue_on(t, 0, 2, z, 4), 0);
	assert_int_equal(corrections_on(t, 0, 1, 1, &flip), 0);
	assert_int_equal(flip, 0);
}

static void test_counters(void **state)
{
	uint8_t z[1] = { 0 }, flip;

	(void)state;
	NEED_DECODER();
	assert_int_equal(reset(0), 0);
	/* not complete: no corrections yet (0 bits asked is fine) */
	assert_int_equal(corrections_on(F.t, 0, 1, 0, &flip), QL_QEC_E_DECODER);
	assert_int_equal(corrections_on(F.t, 0, 0, 0, &flip), 0);
	assert_int_equal(enqueue(0, 1, z, 4), QL_QEC_E_INVALID);  /* skipped 0 */
	assert_int_equal(enqueue(0, -1, z, 4), QL_QEC_E_INVALID); /* negative */
	assert_int_equal(enqueue(0, 0, z, 4), 0);
	assert_int_equal(enqueue(0, 0, z, 4), QL_QEC_E_INVALID); /* repeated */
	assert_int_equal(enqueue(0, 2, z, 4), QL_QEC_E_INVALID); /* skipped 1 */
	assert_int_equal(enqueue(0, INT64_MAX, z, 4), QL_QEC_E_INVALID);
	assert_int_equal(enqueue(0, 1, z, 4), 0);
	assert_int_equal(corrections_on(F.t, 0, 1, 0, &flip), QL_QEC_E_DECODER);
	assert_int_equal(enqueue(0, 2, z, 4), 0);		 /* the final readout */
	assert_int_equal(enqueue(0, 3, z, 4), QL_QEC_E_INVALID); /* past it */
	assert_int_equal(enqueue(0, 0, z, 4), QL_QEC_E_INVALID); /* a new shot needs a reset */
	/* the reply slot too small for 8 bytes of corrections: -5 */
	{
		uint8_t a[17];

		ql_qec_get_corrections_encode(a, 0, 1, 0);
		assert_int_equal(call_on(F.t, QL_QEC_FN_GET_CORRECTIONS, a, 17,
					 QL_RPC_RESPONSE_SIZE + 7, NULL),
				 QL_QEC_E_REPLY_SIZE);
	}
	assert_int_equal(corrections_on(F.t, 0, 1, 0, &flip), 0); /* reset=0: kept */
	assert_int_equal(flip, 0);
	assert_int_equal(corrections_on(F.t, 0, 1, 1, &flip), 0); /* read and reset */
	assert_int_equal(corrections_on(F.t, 0, 1, 0, &flip), QL_QEC_E_DECODER);
	good_shot(F.t);
	/* code capacity: counter 0 is the only (final) frame */
	assert_int_equal(reset(7), 0);
	assert_int_equal(enqueue(7, 0, z, 4), 0);
	assert_int_equal(enqueue(7, 1, z, 4), QL_QEC_E_INVALID);
	assert_int_equal(corrections_on(F.t, 7, 1, 1, &flip), 0);
	assert_int_equal(flip, 0);
}

/* Shots of the simulation through decoder `id` give the decoder's own
 * flips; measurement input sends each round's outcomes (running XOR of the
 * events), detector input the events. */
static void shots_match(int64_t id, unsigned d, unsigned rounds, double p, double q,
			enum ql_qec_input input, unsigned nshots)
{
	struct ql_qec_params pp = { .distance = d,
				    .rounds = rounds,
				    .p = p,
				    .q = q,
				    .noise = rounds ? QL_QEC_PHENOMENOLOGICAL :
						      QL_QEC_CODE_CAPACITY,
				    .seed = 42 };
	struct ql_qec_code *code;
	struct ql_qec_sim *sim;
	struct ql_qec_decoder *dec;
	uint8_t frames[64 * 8], raw[8], out[8], obs, want, got;
	size_t fb;
	unsigned ndet, flips = 0;

	assert_int_equal(ql_qec_code_create(d, &code), 0);
	assert_int_equal(ql_qec_sim_create(code, &pp, &sim), 0);
	assert_int_equal(ql_qec_decoder_create(code, &pp, NULL, &dec), 0);
	fb = ql_qec_frame_bytes(code);
	ndet = ql_qec_code_detectors(code);
	assert_true((rounds + 1) * fb <= sizeof(frames) && fb <= sizeof(raw));
	assert_int_equal(reset(id), 0);
	for (unsigned s = 0; s < nshots; s++) {
		assert_int_equal(ql_qec_sim_shot(sim, frames, &obs), 0);
		ql_qec_decoder_reset(dec);
		memset(raw, 0, sizeof(raw));
		for (unsigned r = 0; r <= rounds; r++) {
			const uint8_t *f = frames + r * fb;

			if (r < rounds)
				assert_int_equal(ql_qec_decoder_push(dec, f), 0);
			else
				assert_int_equal(ql_qec_decoder_finish(dec, f, &want), 0);
			for (size_t i = 0; i < fb; i++) {
				raw[i] ^= f[i];
				out[i] = input == QL_QEC_INPUT_MEASUREMENTS ? raw[i] : f[i];
			}
			assert_int_equal(enqueue(id, r, out, ndet), 0);
		}
		assert_int_equal(corrections_on(F.t, id, 1, 1, &got), 0);
		assert_int_equal(got, want);
		flips += got;
	}
	/* at these rates some shots need a logical correction: the test can fail */
	assert_true(flips > 0);
	ql_qec_decoder_destroy(dec);
	ql_qec_sim_destroy(sim);
	ql_qec_code_destroy(code);
}

static void test_matches_decoder(void **state)
{
	(void)state;
	NEED_DECODER();
	shots_match(0, 3, 2, 0.03, 0.03, QL_QEC_INPUT_MEASUREMENTS, 400);
	shots_match(5, 5, 3, 0.02, 0.01, QL_QEC_INPUT_DETECTORS, 400);
	shots_match(7, 3, 0, 0.05, 0, QL_QEC_INPUT_MEASUREMENTS, 400);
}

/* Hostile calls leave a decoder able to serve the next good shot. */
static void test_hostile_then_good(void **state)
{
	uint8_t a[64] = { 0 }, z[1] = { 0 };

	(void)state;
	NEED_DECODER();
	assert_int_equal(reset(0), 0);
	assert_int_equal(enqueue(0, 0, z, 4), 0);
	assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, 7, NULL), QL_QEC_E_ARG_LEN);
	ql_rpc_put_i64(a + 24, (int64_t)1 << 40);
	assert_int_equal(call(QL_QEC_FN_ENQUEUE_SYNDROMES, a, 40, NULL), QL_QEC_E_TOO_LARGE);
	assert_int_equal(enqueue(0, 5, z, 4), QL_QEC_E_INVALID);
	assert_int_equal(enqueue(0, 1, z, 7), QL_QEC_E_INVALID);
	assert_int_equal(enqueue(0, 1, z, 4), 0);
	assert_int_equal(enqueue(0, 2, z, 4), 0);
	assert_int_equal(corrections_on(F.t, 0, 1, 1, NULL), 0);
	good_shot(F.t);
}

/* Two sessions (tables) of one plugin: separate decoders. */
static void test_sessions(void **state)
{
	uint8_t z[1] = { 0 };

	(void)state;
	NEED_DECODER();
	assert_int_equal(reset(0), 0);
	assert_int_equal(enqueue_on(F.t, 0, 0, z, 4), 0);
	assert_int_equal(enqueue_on(F.t, 0, 1, z, 4), 0);
	/* the other session's decoder 0 still expects round 0 */
	assert_int_equal(enqueue_on(F.t2, 0, 1, z, 4), QL_QEC_E_INVALID);
	good_shot(F.t2);
	assert_int_equal(enqueue_on(F.t, 0, 2, z, 4), 0);
	assert_int_equal(corrections_on(F.t, 0, 1, 1, NULL), 0);
}

/* ---- callers sharing a UDP listener --------------------------------------- */

struct ufx {
	struct ql_channel *ch;
	struct ql_daemon *d;
	uint16_t port;
	uint32_t rid;
};

/* A socket of its own (its own source port), connected to the listener. */
static int usock(const struct ufx *u)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(u->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* fid(args) from socket fd, a full 256-byte slot as CUDA-Q sends; serve
 * until the reply; its status (and *flip, bit 0 of a result). */
static int32_t ucall(struct ufx *u, int fd, uint32_t fid, const uint8_t *args, uint32_t arg_len,
		     uint8_t *flip)
{
	uint8_t msg[256] = { 0 }, resp[256];
	struct ql_rpc_header h = { .magic = QL_RPC_MAGIC_REQUEST,
				   .function_id = fid,
				   .arg_len = arg_len,
				   .request_id = ++u->rid };
	struct ql_rpc_response r;

	ql_rpc_header_encode(msg, &h);
	memcpy(msg + QL_RPC_HEADER_SIZE, args, arg_len);
	assert_int_equal(send(fd, msg, sizeof(msg), 0), (ssize_t)sizeof(msg));
	for (int i = 0; i < 2000000; i++) {
		ssize_t n;

		assert_true(ql_daemon_poll(u->d) >= 0);
		n = recv(fd, resp, sizeof(resp), 0);
		if (n < 0)
			continue;
		assert_true(n >= (ssize_t)QL_RPC_RESPONSE_SIZE);
		ql_rpc_response_decode(resp, &r);
		assert_int_equal(r.request_id, u->rid);
		if (flip)
			*flip = r.result_len ? resp[QL_RPC_RESPONSE_SIZE] : 0;
		return r.status;
	}
	fail_msg("no reply");
	return 0;
}

static int32_t u_enqueue(struct ufx *u, int fd, int64_t id, int64_t counter)
{
	uint8_t a[64], z[1] = { 0 };
	int len = ql_qec_enqueue_encode(a, sizeof(a), id, counter, z, 4);

	assert_true(len > 0);
	return ucall(u, fd, QL_QEC_FN_ENQUEUE_SYNDROMES, a, (uint32_t)len, NULL);
}

static int32_t u_reset(struct ufx *u, int fd, int64_t id)
{
	uint8_t a[8];

	ql_qec_reset_encode(a, id);
	return ucall(u, fd, QL_QEC_FN_RESET_DECODER, a, 8, NULL);
}

static int32_t u_corrections(struct ufx *u, int fd, int64_t id, uint8_t reset_after)
{
	uint8_t a[17];

	ql_qec_get_corrections_encode(a, id, 1, reset_after);
	return ucall(u, fd, QL_QEC_FN_GET_CORRECTIONS, a, 17, NULL);
}

/*
 * The attack of issue 22, item 4: callers sharing a UDP listener (qlinkd's
 * `udp:`) each get their own decoders. A second source resets decoder 0
 * mid-shot, feeds it the caller's next round and asks for its
 * corrections: none of it touches the caller's shot, which completes.
 * The table is bounded (8 sources): idle sources are evicted, and a
 * ninth source while eight are mid-shot is refused, touching nothing.
 */
static void test_udp_sources(void **state)
{
	struct ql_udp_channel_config cc = { .address = "127.0.0.1", .num_slots = 16 };
	struct ql_daemon_config dc = { .cpu = -1, .bad_requests = QL_BAD_REQUEST_DROP };
	struct sockaddr_storage ss;
	socklen_t sl;
	struct ufx u = { 0 };
	int a, b, c[9];

	(void)state;
	NEED_DECODER();
	assert_int_equal(ql_udp_channel_create(&cc, &u.ch), 0);
	assert_int_equal(ql_udp_channel_local_addr(u.ch, &ss, &sl), 0);
	u.port = ntohs(((struct sockaddr_in *)(void *)&ss)->sin_port);
	assert_int_equal(ql_daemon_create(&dc, u.ch, &u.d), 0);
	assert_int_equal(ql_plugin_register(F.plugin, u.d), 0);
	a = usock(&u);
	b = usock(&u);
	/* the caller: rounds 0 and 1 of a shot of decoder 0 (2 rounds + final) */
	assert_int_equal(u_reset(&u, a, 0), 0);
	assert_int_equal(u_enqueue(&u, a, 0, 0), 0);
	assert_int_equal(u_enqueue(&u, a, 0, 1), 0);
	/* the third party: reset, inject the caller's final round, read */
	assert_int_equal(u_reset(&u, b, 0), 0);
	assert_int_equal(u_enqueue(&u, b, 0, 2), QL_QEC_E_INVALID);
	assert_int_equal(u_corrections(&u, b, 0, 1), QL_QEC_E_DECODER);
	/* the caller's shot is whole */
	assert_int_equal(u_enqueue(&u, a, 0, 2), 0);
	assert_int_equal(u_corrections(&u, a, 0, 1), 0);

	/* eight new sources mid-shot: six free entries, then the caller and
	 * the third party (both between shots) are evicted */
	for (int i = 0; i < 8; i++) {
		c[i] = usock(&u);
		assert_int_equal(u_enqueue(&u, c[i], 0, 0), 0);
	}
	/* a ninth while all eight are mid-shot: refused */
	c[8] = usock(&u);
	assert_int_equal(u_enqueue(&u, c[8], 0, 0), QL_QEC_E_DECODER);
	assert_int_equal(u_reset(&u, c[8], 0), QL_QEC_E_DECODER);
	/* and nobody's shot was touched */
	for (int i = 0; i < 8; i++)
		assert_int_equal(u_enqueue(&u, c[i], 0, 1), 0);
	for (int i = 0; i < 9; i++)
		close(c[i]);
	close(a);
	close(b);
	ql_daemon_destroy(u.d);
	ql_channel_destroy(u.ch);
}

/* ---- the hot path ---------------------------------------------------------- */

struct hp_arg {
	uint8_t msgs[5][128];
	uint32_t lens[5];
	uint8_t resp[128];
	bool real; /* a real decoder: every call must succeed */
};

static int hp_loop(void *arg)
{
	struct hp_arg *h = arg;
	size_t len;

	for (int shot = 0; shot < 200; shot++)
		for (int i = 0; i < 5; i++) {
			int32_t st = ql_rpc_dispatch(F.t, h->msgs[i], h->lens[i], h->resp,
						     sizeof(h->resp), &len, NULL);

			if (st && h->real)
				return -1;
		}
	return 0;
}

static void test_hotpath(void **state)
{
	static struct hp_arg h;
	uint8_t z[1] = { 0x5 }, a[64];
	char why[256];

	(void)state;
	/* reset, rounds 0..2 of decoder 0, get_corrections with reset */
	for (int i = 0; i < 5; i++) {
		struct ql_rpc_header hd = { .magic = QL_RPC_MAGIC_REQUEST,
					    .request_id = (uint32_t)i };
		int len;

		if (i == 0) {
			hd.function_id = QL_QEC_FN_RESET_DECODER;
			ql_qec_reset_encode(a, 0);
			len = 8;
		} else if (i < 4) {
			hd.function_id = QL_QEC_FN_ENQUEUE_SYNDROMES;
			len = ql_qec_enqueue_encode(a, sizeof(a), 0, i - 1, z, 4);
		} else {
			hd.function_id = QL_QEC_FN_GET_CORRECTIONS;
			ql_qec_get_corrections_encode(a, 0, 1, 1);
			len = 17;
		}
		hd.arg_len = (uint32_t)len;
		ql_rpc_header_encode(h.msgs[i], &hd);
		memcpy(h.msgs[i] + QL_RPC_HEADER_SIZE, a, (size_t)len);
		h.lens[i] = QL_RPC_HEADER_SIZE + (uint32_t)len;
	}
	h.real = decoder_works();
	/* warm up (first touches), then the proofs */
	assert_int_equal(hp_loop(&h), 0);
	if (hp_check(hp_loop, &h, why, sizeof(why)))
		fail_msg("%s", why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_refusals),	  cmocka_unit_test(test_wrong_lengths),
		cmocka_unit_test(test_huge_and_negative), cmocka_unit_test(test_unknown_ids),
		cmocka_unit_test(test_wrong_count),	  cmocka_unit_test(test_counters),
		cmocka_unit_test(test_matches_decoder),	  cmocka_unit_test(test_hostile_then_good),
		cmocka_unit_test(test_sessions),	  cmocka_unit_test(test_udp_sources),
		cmocka_unit_test(test_hotpath),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
