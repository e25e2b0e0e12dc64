/* SPDX-License-Identifier: MIT */
/* The data-plane fuzz harness (see rpc_ring_harness.h). */
#include "rpc_ring_harness.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/rx_ring.h"

/* ---- the RTH's functions: one of each argument shape ------------------- */

static int32_t add(int32_t a, int32_t b, int32_t *sum)
{
	*sum = (int32_t)((uint32_t)a + (uint32_t)b);
	return 0;
}
QL_RPC_FN(add, QL_ARG_I32, QL_ARG_I32, QL_RES_I32);

static int32_t parity(const uint8_t *bits, uint8_t *p)
{
	uint8_t x = 0;

	for (int i = 0; i < 13; i++)
		x ^= (uint8_t)ql_rpc_bit_get(bits, (size_t)i);
	*p = x;
	return 0;
}
QL_RPC_FN(parity, QL_ARG_BITS(13), QL_RES_U8);

/* an f64 array after a u8: unaligned in the message */
static int32_t sum_f64(uint8_t k, const double *v, double *s)
{
	*s = (double)k + v[0] + v[1] + v[2];
	return 0;
}
QL_RPC_FN(sum_f64, QL_ARG_U8, QL_ARG_F64_ARRAY(3), QL_RES_F64);

static int32_t scale(const float *v, float f, float *out)
{
	for (int i = 0; i < 4; i++)
		out[i] = v[i] * f;
	return 0;
}
QL_RPC_FN(scale, QL_ARG_F32_ARRAY(4), QL_ARG_F32, QL_RES_F32_ARRAY(4));

static int32_t mix(int64_t a, uint32_t b, const int32_t *c, int64_t *r, uint32_t *s)
{
	*r = (int64_t)((uint64_t)a ^ b);
	*s = b + (uint32_t)c[0] + (uint32_t)c[1];
	return 0;
}
QL_RPC_FN(mix, QL_ARG_I64, QL_ARG_U32, QL_ARG_I32_ARRAY(2), QL_RES_I64, QL_RES_U32);

/* 200 result bytes: more than small response buffers hold */
static int32_t big(uint8_t x, uint8_t *r)
{
	memset(r, x, 200);
	return 0;
}
QL_RPC_FN(big, QL_ARG_U8, QL_RES_U8_ARRAY(200));

/* a = 0: ok; > 0: that handler status; < 0: an internal failure */
static int32_t fail(int32_t a, uint8_t *r)
{
	*r = 1;
	return a;
}
QL_RPC_FN(fail, QL_ARG_I32, QL_RES_U8);

/* raw: echoes every argument byte */
static int32_t echo(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	size_t n = ql_rpc_in_left(in);

	(void)ctx;
	ql_rpc_write_bytes(out, ql_rpc_in_view(in, n), n);
	return 0;
}

/* raw: a u32 count, then that many bytes (trusting the count), their sum */
static int32_t counted(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	uint32_t n = ql_rpc_read_u32(in), sum = 0;
	const uint8_t *p = ql_rpc_in_view(in, n);

	(void)ctx;
	for (uint32_t i = 0; p && i < n; i++)
		sum += p[i];
	ql_rpc_write_u32(out, sum);
	return 0;
}

/* raw: writes as many bytes as its u16 argument says, without checking */
static int32_t spew(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	uint32_t n = ql_rpc_read_u32(in) & 0xffff;

	(void)ctx;
	for (uint32_t i = 0; i < n && !out->err; i++)
		ql_rpc_write_u8(out, (uint8_t)i);
	return 0;
}

enum { F_ADD, F_PARITY, F_SUM, F_SCALE, F_MIX, F_BIG, F_FAIL, F_ECHO, F_COUNTED, F_SPEW, F_N };

static struct ql_rpc_table *table;
static uint32_t ids[F_N];

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_rpc_ring: guarantee violated: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

#define CHECK(cond, ...)                  \
	do {                              \
		if (!(cond))              \
			die(__VA_ARGS__); \
	} while (0)

static void table_init(void)
{
	struct ql_rpc_function fns[F_N] = {
		[F_ADD] = QL_RPC_FUNCTION(add),
		[F_PARITY] = QL_RPC_FUNCTION(parity),
		[F_SUM] = QL_RPC_FUNCTION(sum_f64),
		[F_SCALE] = QL_RPC_FUNCTION(scale),
		[F_MIX] = QL_RPC_FUNCTION(mix),
		[F_BIG] = QL_RPC_FUNCTION(big),
		[F_FAIL] = QL_RPC_FUNCTION(fail),
		[F_ECHO] = QL_RPC_RAW_FUNCTION("echo", echo, NULL),
		[F_COUNTED] = QL_RPC_RAW_FUNCTION("counted", counted, NULL),
		[F_SPEW] = QL_RPC_RAW_FUNCTION("spew", spew, NULL),
	};

	if (ql_rpc_table_create(F_N, &table))
		die("ql_rpc_table_create");
	for (int i = 0; i < F_N; i++) {
		if (ql_rpc_table_add(table, &fns[i]) != i)
			die("ql_rpc_table_add(%s)", fns[i].name);
		ids[i] = fns[i].id;
	}
}

/* The response's promises for one request (ql_rpc_dispatch's comment). */
static void check_response(const uint8_t *msg, size_t msg_len, const uint8_t *resp, size_t resp_cap,
			   size_t resp_len, int32_t st, const struct ql_rpc_dispatch_info *info)
{
	struct ql_rpc_header h = { 0 };
	struct ql_rpc_response r;
	const struct ql_rpc_function *f;
	int idx;

	CHECK(info->status == st, "info.status %d, returned %d", info->status, st);
	if (resp_cap < QL_RPC_RESPONSE_SIZE) {
		CHECK(st == QL_RPC_E_INTERNAL && resp_len == 0,
		      "resp_cap %zu: status %d, resp_len %zu", resp_cap, st, resp_len);
		return;
	}
	CHECK(resp_len >= QL_RPC_RESPONSE_SIZE && resp_len <= resp_cap, "resp_len %zu of cap %zu",
	      resp_len, resp_cap);
	ql_rpc_response_decode(resp, &r);
	CHECK(r.magic == QL_RPC_MAGIC_RESPONSE, "response magic 0x%08x", r.magic);
	CHECK(r.status == st, "response status %d, returned %d", r.status, st);
	CHECK(r.result_len == resp_len - QL_RPC_RESPONSE_SIZE, "result_len %u, resp_len %zu",
	      r.result_len, resp_len);
	CHECK(info->result_len == r.result_len, "info.result_len %u", info->result_len);
	CHECK(st == 0 || r.result_len == 0, "status %d with %u result bytes", st, r.result_len);
	CHECK((st == 0) == (info->kind == QL_RPC_ERR_NONE), "status %d, kind %s", st,
	      ql_rpc_err_kind_str(info->kind));
	if (msg_len < QL_RPC_HEADER_SIZE) {
		CHECK(st == QL_RPC_E_SHORT && r.request_id == 0 && r.ptp_timestamp == 0,
		      "short message (%zu): status %d", msg_len, st);
		return;
	}
	ql_rpc_header_decode(msg, &h);
	CHECK(r.request_id == h.request_id && r.ptp_timestamp == h.ptp_timestamp,
	      "request id/timestamp not echoed");
	CHECK((h.magic != QL_RPC_MAGIC_REQUEST) == (st == QL_RPC_E_BAD_MAGIC),
	      "magic 0x%08x, status %d", h.magic, st);
	if (st == QL_RPC_E_BAD_MAGIC)
		return;
	CHECK((h.arg_len > msg_len - QL_RPC_HEADER_SIZE) == (st == QL_RPC_E_BAD_LENGTH),
	      "arg_len %u in %zu bytes, status %d", h.arg_len, msg_len, st);
	if (st == QL_RPC_E_BAD_LENGTH)
		return;
	idx = ql_rpc_table_find(table, h.function_id);
	CHECK((idx < 0) == (st == QL_RPC_E_UNKNOWN_FUNCTION), "function 0x%08x, status %d",
	      h.function_id, st);
	CHECK(info->index == idx, "info.index %d, table %d", info->index, idx);
	if (idx < 0 || st != 0)
		return;
	/* success: what a typed function answered is right */
	f = ql_rpc_table_get(table, idx);
	if (f->schema) {
		CHECK(h.arg_len == ql_rpc_schema_args_size(f->schema), "%s: arg_len %u accepted",
		      f->name, h.arg_len);
		CHECK(r.result_len == ql_rpc_schema_results_size(f->schema), "%s: result_len %u",
		      f->name, r.result_len);
	}
	const uint8_t *a = msg + QL_RPC_HEADER_SIZE, *res = resp + QL_RPC_RESPONSE_SIZE;

	switch (idx) {
	case F_ADD:
		CHECK(ql_rpc_get_u32(res) == ql_rpc_get_u32(a) + ql_rpc_get_u32(a + 4), "add");
		break;
	case F_PARITY: {
		uint8_t x = 0;

		for (int i = 0; i < 13; i++)
			x ^= (uint8_t)((a[i / 8] >> (i % 8)) & 1);
		CHECK(res[0] == x, "parity");
		break;
	}
	case F_ECHO:
		CHECK(r.result_len == h.arg_len && !memcmp(res, a, h.arg_len), "echo");
		break;
	case F_BIG:
		for (int i = 0; i < 200; i++)
			CHECK(res[i] == a[0], "big[%d]", i);
		break;
	case F_FAIL:
		CHECK(ql_rpc_get_i32(a) == 0, "fail(%d) succeeded", ql_rpc_get_i32(a));
		break;
	default:
		break;
	}
}

static const uint32_t resp_caps[8] = { 0, 23, 24, 25, 40, 64, 0 /* slot_size */, 4096 };
static const int bursts[8] = { 1, 2, 3, 4, 8, 16, 32, 64 };

int qlf_rpc_ring_one(const uint8_t *data, size_t size, struct qlf_rpc_ring_stats *stats)
{
	struct ql_buffer *got[64];
	struct ql_rx_ring rx;
	uint32_t num_slots, slot_size, resp_cap, cap;
	uint8_t *ring, *resp;
	size_t pos = 2;
	bool raw;
	int max;

	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (size < 2)
		return -1;
	if (!table)
		table_init();
	num_slots = 1u << (data[0] & 3);
	slot_size = 64u << ((data[0] >> 2) & 3);
	raw = data[1] & 1;
	resp_cap = resp_caps[(data[1] >> 2) & 7];
	if (!resp_cap && ((data[1] >> 2) & 7) == 6)
		resp_cap = slot_size;
	max = bursts[data[1] >> 5];
	cap = slot_size - QL_RING_SLOT_HDR;

	/* exactly sized: ASan sees one byte too far either way */
	ring = malloc(ql_ring_bytes(num_slots, slot_size));
	resp = malloc(resp_cap ? resp_cap : 1);
	if (!ring || !resp)
		die("out of memory");
	memset(ring, 0, ql_ring_bytes(num_slots, slot_size));
	if (ql_rx_ring_init(&rx, ring, num_slots, slot_size))
		die("ql_rx_ring_init(%u, %u)", num_slots, slot_size);
	if (data[1] & 2)
		rx.next = 0xfffffffcull; /* the slot index wraps with the low 32 bits */

	for (unsigned int round = 0; pos < size && round < 64; round++) {
		uint64_t first = rx.next;

		/* the QCS writes the next num_slots slots */
		for (uint32_t i = 0; i < num_slots && pos < size; i++) {
			uint64_t k = first + i;
			uint8_t *slot = ring + ql_ring_slot_offset(num_slots, slot_size, k);
			size_t n;

			if (raw) {
				n = size - pos < slot_size ? size - pos : slot_size;
				memcpy(slot, data + pos, n);
				pos += n;
				continue;
			}
			if (size - pos < 2)
				break;
			n = (size_t)(data[pos] | data[pos + 1] << 8);
			pos += 2;
			bool gap = n & 0x8000;

			n &= 0x7fff;
			if (n > size - pos)
				n = size - pos;
			if (n > slot_size - 8)
				n = slot_size - 8;
			memcpy(slot + 8, data + pos, n);
			pos += n;
			if (!gap)
				ql_rpc_put_u64(slot, k + 1);
		}
		if (stats)
			stats->rounds++;

		/* the RTH collects and answers what is ready */
		for (;;) {
			uint64_t before = rx.next;
			int n = ql_rx_ring_burst(&rx, got, max);

			CHECK(n >= 0 && n <= max, "burst %d of %d", n, max);
			CHECK(rx.next == before + (uint64_t)n, "next moved by %llu, %d collected",
			      (unsigned long long)(rx.next - before), n);
			if (!n)
				break;
			for (int j = 0; j < n; j++) {
				struct ql_buffer *b = got[j];
				uint64_t k = before + (uint64_t)j;
				uint8_t *slot = ring + ql_ring_slot_offset(num_slots, slot_size, k);
				struct ql_rpc_dispatch_info info;
				size_t resp_len = 12345;
				uint32_t wlen = ql_rpc_get_u32(slot + 8);
				int32_t st;

				CHECK(b->tag == k, "tag %llu, expected %llu",
				      (unsigned long long)b->tag, (unsigned long long)k);
				CHECK(ql_rpc_get_u64(slot) == k + 1,
				      "slot %llu collected, not ready", (unsigned long long)k);
				CHECK(ql_buffer_data(b) == slot + QL_RING_SLOT_HDR,
				      "buffer data outside its slot");
				CHECK(b->len == (wlen <= cap ? wlen : cap), "len %u for written %u",
				      b->len, wlen);
				st = ql_rpc_dispatch(table, ql_buffer_data(b), b->len,
						     resp_cap ? resp : NULL, resp_cap, &resp_len,
						     &info);
				check_response(ql_buffer_data(b), b->len, resp, resp_cap, resp_len,
					       st, &info);
				/* a len beyond the slot is never served as a request */
				CHECK(wlen <= cap || st == QL_RPC_E_BAD_LENGTH ||
					      st == QL_RPC_E_BAD_MAGIC || st == QL_RPC_E_INTERNAL,
				      "len %u beyond the slot answered %d", wlen, st);
				if (stats) {
					stats->requests++;
					if ((unsigned int)info.kind < QL_RPC_ERR_KIND_COUNT)
						stats->by_kind[info.kind]++;
				}
			}
		}
	}
	ql_rx_ring_fini(&rx);
	free(resp);
	free(ring);
	return 0;
}
