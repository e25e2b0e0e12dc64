/* SPDX-License-Identifier: MIT */
/*
 * The hsb transport: the host channel (UC, pages at iova 0, receive WQE per
 * page, SEND responses) under the daemon, driven by the hsb client as an
 * FPGA drives it, over soft://loop and soft+shm (in one process, and across
 * processes). Every answer is checked (magic, status, request_id and
 * ptp_timestamp echo, results). Hostile frames: immediate out of range,
 * byte_len beyond a page, bad magic / unknown function / short under the
 * drop and the answer policy; a response larger than the QCS's receive
 * buffers; the parameter rules and text form.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <qlink/daemon.h>
#include <qlink/error.h>
#include <qlink/hsb.h>
#include <qlink/rpc.h>

#include "hotpath.h"

/* hsb.h states the RPC headers' sizes as its minimums (the transport
 * layer does not include the RPC layer's headers): they must agree */
_Static_assert(QL_HSB_MIN_FRAME == QL_RPC_HEADER_SIZE, "hsb frame minimum");
_Static_assert(QL_HSB_MIN_RESP == QL_RPC_RESPONSE_SIZE, "hsb response minimum");

#define PAGES 8
#define PAGE_SIZE 384
#define RESP_SIZE 256
#define TIMEOUT_MS 5000

struct kind {
	const char *name;
	bool shm;
};

static const struct kind kinds[] = { { "loop", false }, { "shm", true } };

struct hx {
	const struct kind *k;
	struct ql_device *ds, *dc;
	struct ql_channel *ch;
	struct ql_daemon *d;
	struct ql_hsb_client *cl;
	struct ql_hsb_params hp;
	uint32_t next_id;
};

/* rpc_increment: every argument byte plus one (section (a) of the note) */
static int32_t h_increment(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	size_t n = ql_rpc_in_left(in);
	const uint8_t *a = ql_rpc_in_view(in, n);
	uint8_t *r = ql_rpc_out_reserve(out, n);

	(void)ctx;
	if (!r)
		return -1;
	for (size_t i = 0; i < n; i++)
		r[i] = (uint8_t)(a[i] + 1);
	return 0;
}

/* writes 512 result bytes: more than a 256-byte receive buffer holds */
static int32_t h_flood(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	uint8_t junk[512] = { 0 };

	(void)in;
	(void)ctx;
	ql_rpc_write_bytes(out, junk, sizeof(junk));
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void dev_uri(const struct kind *k, char *buf, size_t len, const char *end)
{
	static unsigned int seq;

	if (k->shm)
		snprintf(buf, len, "soft+shm://hsb-%d-%u-%s", (int)getpid(), seq++, end);
	else
		snprintf(buf, len, "soft://loop");
}

static int server_open(struct hx *x, const struct kind *k, enum ql_bad_request_policy pol)
{
	struct ql_hsb_channel_config cc = {
		.num_pages = PAGES,
		.page_size = PAGE_SIZE,
		.resp_size = RESP_SIZE,
	};
	struct ql_daemon_config dc = { .cpu = -1, .bad_requests = pol };
	struct ql_rpc_function inc = { .name = "rpc_increment",
				       .id = ql_rpc_fnv1a("rpc_increment"),
				       .fn = h_increment };
	struct ql_rpc_function flood = { .name = "flood",
					 .id = ql_rpc_fnv1a("flood"),
					 .fn = h_flood };
	char uri[QL_DEVICE_URI_MAX];
	int ret;

	dev_uri(k, uri, sizeof(uri), "s");
	ret = ql_device_open(uri, &x->ds);
	if (!ret)
		ret = ql_hsb_channel_create(x->ds, &cc, &x->ch);
	if (!ret)
		ret = ql_daemon_create(&dc, x->ch, &x->d);
	if (!ret)
		ret = ql_daemon_register(x->d, &inc);
	if (!ret)
		ret = ql_daemon_register(x->d, &flood);
	if (!ret)
		ret = ql_hsb_channel_local_params(x->ch, &x->hp);
	return ret;
}

static int client_open(struct hx *x, const struct kind *k)
{
	struct ql_hsb_client_config c = { .recv_buffers = 16, .recv_size = RESP_SIZE };
	char uri[QL_DEVICE_URI_MAX];
	int ret;

	dev_uri(k, uri, sizeof(uri), "c");
	ret = ql_device_open(uri, &x->dc);
	if (!ret)
		ret = ql_hsb_client_create(x->dc, &c, &x->cl);
	return ret;
}

static void server_close(struct hx *x)
{
	if (x->d)
		ql_daemon_destroy(x->d);
	if (x->ch)
		ql_channel_destroy(x->ch);
	if (x->ds)
		ql_device_close(x->ds);
	x->d = NULL;
	x->ch = NULL;
	x->ds = NULL;
}

static void client_close(struct hx *x)
{
	if (x->cl)
		ql_hsb_client_destroy(x->cl);
	if (x->dc)
		ql_device_close(x->dc);
	x->cl = NULL;
	x->dc = NULL;
}

static int setup_policy(void **state, const struct kind *k, enum ql_bad_request_policy pol)
{
	struct hx *x = calloc(1, sizeof(*x));
	struct ql_conn_params cp;

	if (!x)
		return -1;
	x->k = k;
	if (server_open(x, k, pol) || client_open(x, k) || ql_hsb_client_local_params(x->cl, &cp) ||
	    ql_hsb_channel_connect(x->ch, &cp, NULL) ||
	    ql_hsb_client_connect(x->cl, &x->hp, NULL)) {
		print_error("setup: %s\n", ql_error_detail());
		return -1;
	}
	x->next_id = 1;
	*state = x;
	return 0;
}

static int setup_loop_drop(void **s)
{
	return setup_policy(s, &kinds[0], QL_BAD_REQUEST_DROP);
}
static int setup_shm_drop(void **s)
{
	return setup_policy(s, &kinds[1], QL_BAD_REQUEST_DROP);
}
static int setup_loop_answer(void **s)
{
	return setup_policy(s, &kinds[0], QL_BAD_REQUEST_ANSWER);
}
static int setup_shm_answer(void **s)
{
	return setup_policy(s, &kinds[1], QL_BAD_REQUEST_ANSWER);
}

static int teardown(void **state)
{
	struct hx *x = *state;

	client_close(x);
	server_close(x);
	free(x);
	return 0;
}

static uint32_t make_req(uint8_t *buf, const char *fn, uint32_t id, uint64_t ptp, uint32_t arg_len)
{
	struct ql_rpc_header h = { .magic = QL_RPC_MAGIC_REQUEST,
				   .function_id = ql_rpc_fnv1a(fn),
				   .arg_len = arg_len,
				   .request_id = id,
				   .ptp_timestamp = ptp };

	ql_rpc_header_encode(buf, &h);
	for (uint32_t i = 0; i < arg_len; i++)
		buf[QL_RPC_HEADER_SIZE + i] = (uint8_t)(id * 7 + i);
	return QL_RPC_HEADER_SIZE + arg_len;
}

/* Serve (in this thread, when the daemon is ours) until one response comes
 * or ms pass: its length (copied to out), or -ETIMEDOUT. */
static int wait_resp(struct hx *x, uint8_t *out, uint32_t cap, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	struct ql_ring_response r;

	do {
		int n;

		if (x->d)
			assert_true(ql_daemon_poll(x->d) >= 0);
		n = ql_hsb_client_poll(x->cl, &r, 1);
		assert_true(n >= 0);
		if (n == 1) {
			uint32_t len = r.len < cap ? r.len : cap;

			memcpy(out, r.msg, len);
			assert_int_equal(ql_hsb_client_release(x->cl, &r), 0);
			return (int)r.len;
		}
	} while (now_ms() < end);
	return -ETIMEDOUT;
}

/* The daemon's counters once its send completions are in: `responses`
 * counts SENDs completed, which the daemon learns on a later poll than the
 * one that sent them. Polls until want responses or the timeout. */
static void stats_after_sends(struct hx *x, uint64_t want, struct ql_daemon_stats *st)
{
	uint64_t end = now_ms() + TIMEOUT_MS;

	ql_daemon_stats(x->d, st);
	while (st->responses < want && now_ms() < end) {
		assert_true(ql_daemon_poll(x->d) >= 0);
		ql_daemon_stats(x->d, st);
	}
}

/* A response to rpc_increment of make_req(id, ptp, arg_len), all checked. */
static void check_inc(const uint8_t *resp, int len, uint32_t id, uint64_t ptp, uint32_t arg_len)
{
	struct ql_rpc_response r;

	assert_int_equal(len, QL_RPC_RESPONSE_SIZE + arg_len);
	ql_rpc_response_decode(resp, &r);
	assert_int_equal(r.magic, QL_RPC_MAGIC_RESPONSE);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.result_len, arg_len);
	assert_int_equal(r.request_id, id);
	assert_true(r.ptp_timestamp == ptp);
	for (uint32_t i = 0; i < arg_len; i++)
		assert_int_equal(resp[QL_RPC_RESPONSE_SIZE + i], (uint8_t)(id * 7 + i + 1));
}

static void one_call(struct hx *x, uint32_t arg_len)
{
	uint8_t req[PAGE_SIZE], resp[RESP_SIZE];
	uint32_t id = x->next_id++;
	uint64_t ptp = ((uint64_t)id << 32) | 0x5eed;
	uint32_t len = make_req(req, "rpc_increment", id, ptp, arg_len);
	int n;

	assert_int_equal(ql_hsb_client_send(x->cl, req, len), 0);
	n = wait_resp(x, resp, sizeof(resp), TIMEOUT_MS);
	check_inc(resp, n, id, ptp, arg_len);
}

/* Nothing comes back within 100 ms. */
static void expect_silence(struct hx *x)
{
	uint8_t resp[RESP_SIZE];

	assert_int_equal(wait_resp(x, resp, sizeof(resp), 100), -ETIMEDOUT);
}

static void test_roundtrip(void **state)
{
	struct hx *x = *state;
	struct ql_hsb_channel_stats cs;
	uint8_t req[PAGE_SIZE], resp[RESP_SIZE];

	/* three laps of the pages, one at a time, sizes up to a full page
	 * (its response is capped by the receive buffer: 100 bytes fit) */
	for (int i = 0; i < 3 * PAGES; i++)
		one_call(x, (uint32_t)(i * 13) % 100);
	/* a window's worth in flight, answered in order */
	for (uint32_t i = 0; i < PAGES; i++) {
		uint32_t len = make_req(req, "rpc_increment", 1000 + i, i, 16);

		assert_int_equal(ql_hsb_client_send(x->cl, req, len), 0);
	}
	assert_int_equal(ql_hsb_client_send(x->cl, req, 40), -EAGAIN);
	for (uint32_t i = 0; i < PAGES; i++) {
		int n = wait_resp(x, resp, sizeof(resp), TIMEOUT_MS);

		check_inc(resp, n, 1000 + i, i, 16);
	}
	assert_int_equal(ql_hsb_client_in_flight(x->cl), 0);
	assert_int_equal(ql_hsb_channel_stats(x->ch, &cs), 0);
	assert_int_equal(cs.frames, 4 * PAGES);
	assert_int_equal(cs.bad_imm + cs.bad_len + cs.page_busy + cs.recv_errors, 0);
	/* a frame longer than a page never leaves the client */
	assert_int_equal(ql_hsb_client_send(x->cl, req, PAGE_SIZE + 1), -EMSGSIZE);
}

/* Immediate >= num_pages (and all ones): refused by the channel, no
 * response, counted, the WQE re-posted (more than PAGES of them). */
static void test_bad_imm(void **state)
{
	struct hx *x = *state;
	struct ql_hsb_channel_stats cs;
	uint8_t req[PAGE_SIZE];
	uint32_t len = make_req(req, "rpc_increment", 77, 0, 8);

	for (int i = 0; i < 2 * PAGES; i++) {
		assert_int_equal(
			ql_hsb_client_send_raw(x->cl, 0, i % 2 ? 0xffffffffu : PAGES, req, len), 0);
		expect_silence(x);
		if (i % 4 == 3)
			one_call(x, 8);
	}
	assert_int_equal(ql_hsb_channel_stats(x->ch, &cs), 0);
	assert_int_equal(cs.bad_imm, 2 * PAGES);
	one_call(x, 8);
}

/* byte_len beyond a page (a write over two pages): refused, counted. */
static void test_bad_len(void **state)
{
	struct hx *x = *state;
	struct ql_hsb_channel_stats cs;
	uint8_t req[2 * PAGE_SIZE] = { 0 };

	make_req(req, "rpc_increment", 78, 0, 8);
	for (int i = 0; i < PAGES + 2; i++) {
		assert_int_equal(ql_hsb_client_send_raw(x->cl, 0, 0, req, PAGE_SIZE + 128), 0);
		expect_silence(x);
	}
	assert_int_equal(ql_hsb_channel_stats(x->ch, &cs), 0);
	assert_int_equal(cs.bad_len, PAGES + 2);
	for (int i = 0; i < PAGES + 1; i++)
		one_call(x, 4);
}

/* Receive WQEs are re-posted in batches: with the window kept full for
 * many laps of the pages, every frame still finds a WQE (nothing dropped
 * by the NIC) and is answered in order. Fails if the batch held back WQEs
 * a full window needs. */
static void test_full_window_laps(void **state)
{
	struct hx *x = *state;
	struct ql_hsb_channel_stats cs;
	struct ql_device_counters ds, dc;
	uint8_t req[PAGE_SIZE], resp[RESP_SIZE];
	const uint32_t total = 40 * PAGES;
	uint32_t sent = 0, got = 0;

	while (got < total) {
		while (sent < total) {
			uint32_t len = make_req(req, "rpc_increment", 2000 + sent, sent, 12);
			int r = ql_hsb_client_send(x->cl, req, len);

			if (r == -EAGAIN)
				break;
			assert_int_equal(r, 0);
			sent++;
		}
		assert_int_equal(ql_hsb_client_in_flight(x->cl), sent - got);
		if (sent < total)
			assert_int_equal(sent - got, PAGES); /* the window is full */
		check_inc(resp, wait_resp(x, resp, sizeof(resp), TIMEOUT_MS), 2000 + got, got, 12);
		got++;
	}
	assert_int_equal(ql_hsb_channel_stats(x->ch, &cs), 0);
	assert_int_equal(cs.frames, total);
	assert_int_equal(cs.bad_imm + cs.bad_len + cs.page_busy + cs.recv_errors, 0);
	assert_int_equal(ql_device_counters(x->ds, &ds), 0);
	assert_int_equal(ql_device_counters(x->dc, &dc), 0);
	assert_int_equal(ds.uc_drop_no_recv + dc.uc_drop_no_recv, 0);
}

/* A page written again before its frame was served: the second frame is
 * refused (page_busy), only one response comes, and the refused frame's
 * WQE is back: laps of calls after it all go through. */
static void test_page_busy(void **state)
{
	struct hx *x = *state;
	struct ql_hsb_channel_stats cs;
	struct ql_device_counters ds, dc;
	uint8_t req[PAGE_SIZE], resp[RESP_SIZE];
	uint32_t len = make_req(req, "rpc_increment", 90, 9, 8);

	/* the client's first frame goes to page 0; the same bytes again there
	 * before the daemon polls (both completions in one burst) */
	assert_int_equal(ql_hsb_client_send(x->cl, req, len), 0);
	assert_int_equal(ql_hsb_client_send_raw(x->cl, 0, 0, req, len), 0);
	check_inc(resp, wait_resp(x, resp, sizeof(resp), TIMEOUT_MS), 90, 9, 8);
	expect_silence(x);
	assert_int_equal(ql_hsb_channel_stats(x->ch, &cs), 0);
	assert_int_equal(cs.page_busy, 1);
	assert_int_equal(cs.frames, 1);
	x->next_id = 100;
	for (int i = 0; i < 3 * PAGES; i++)
		one_call(x, 8);
	assert_int_equal(ql_device_counters(x->ds, &ds), 0);
	assert_int_equal(ql_device_counters(x->dc, &dc), 0);
	assert_int_equal(ds.uc_drop_no_recv + dc.uc_drop_no_recv, 0);
}

/* ---- board frames, built by hand from the facts ------------------------
 * /work/shared/notes/hololink-facts.md and docs/wire-protocol.md section 8:
 * per frame, WRITE ONLY packets of the frame into the page, then 128 bytes
 * of metadata by WRITE WITH IMMEDIATE at page + round_up(frame, 128),
 * immediate = page | (PSN & 0xFFFFF) << 12; the metadata big-endian: flags
 * 0-3, psn 4-7, crc 8-11, timestamp_s 12-19, timestamp_ns 20-23,
 * bytes_written 24-31, reserved 32-33, frame_number 34-35, metadata_s
 * 36-43, metadata_ns 44-47. Nothing here comes from qlink's encoder. */

static const uint8_t golden_md[48] = {
	0x00, 0x00, 0x00, 0x01,				/* flags 1 */
	0x00, 0x0a, 0xbc, 0xde,				/* psn 0xabcde */
	0xde, 0xad, 0xbe, 0xef,				/* crc */
	0x00, 0x00, 0x00, 0x00, 0x65, 0x43, 0x21, 0x00, /* timestamp_s */
	0x07, 0x5b, 0xcd, 0x15,				/* timestamp_ns 123456789 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, /* bytes_written 128 */
	0x00, 0x00,					/* reserved */
	0x12, 0x34,					/* frame_number */
	0x00, 0x00, 0x00, 0x00, 0x65, 0x43, 0x21, 0x01, /* metadata_s */
	0x3b, 0x9a, 0xc9, 0xff,				/* metadata_ns 999999999 */
};

static void test_golden_constants(void **state)
{
	struct ql_hsb_metadata m;
	uint8_t enc[QL_HSB_METADATA_SIZE], want[QL_HSB_METADATA_SIZE] = { 0 };

	(void)state;
	assert_int_equal(ql_hsb_imm(1, 2), 0x00002001u);
	assert_int_equal(ql_hsb_imm(5, 0xabcde), 0xabcde005u);
	assert_int_equal(ql_hsb_imm(0xfff, 0xffffff), 0xffffffffu); /* PSN & 0xFFFFF */
	assert_int_equal(0xabcde005u & QL_HSB_IMM_PAGE_MASK, 5);
	assert_int_equal(ql_hsb_metadata_offset(24), 128);
	assert_int_equal(ql_hsb_metadata_offset(128), 128);
	assert_int_equal(ql_hsb_metadata_offset(129), 256);
	assert_int_equal(ql_hsb_metadata_offset(280), 384);
	ql_hsb_metadata_decode(golden_md, &m);
	assert_int_equal(m.flags, 1);
	assert_int_equal(m.psn, 0xabcde);
	assert_int_equal(m.crc, 0xdeadbeef);
	assert_true(m.timestamp_s == 0x65432100ull);
	assert_int_equal(m.timestamp_ns, 123456789);
	assert_true(m.bytes_written == 128);
	assert_int_equal(m.frame_number, 0x1234);
	assert_true(m.metadata_s == 0x65432101ull);
	assert_int_equal(m.metadata_ns, 999999999);
	memcpy(want, golden_md, sizeof(golden_md));
	memset(enc, 0xee, sizeof(enc));
	ql_hsb_metadata_encode(enc, &m);
	assert_memory_equal(enc, want, sizeof(want));
}

/* One frame as a board writes it: WRITE ONLY of `pkt` bytes each into the
 * page, then golden_md (its psn and frame number replaced) by WRITE WITH
 * IMMEDIATE `imm` at page + round_up(frame_len, 128). */
static void board_frame(struct hx *x, uint32_t page, uint32_t imm, uint16_t fn,
			const uint8_t *frame, uint32_t pkt)
{
	uint32_t flen = x->hp.frame_len, moff = (flen + 127) / 128 * 128;
	uint8_t md[QL_HSB_METADATA_SIZE] = { 0 };

	for (uint32_t off = 0; off < flen; off += pkt)
		assert_int_equal(ql_hsb_client_write_raw(x->cl, (uint64_t)page * PAGE_SIZE + off,
							 frame + off,
							 flen - off < pkt ? flen - off : pkt),
				 0);
	memcpy(md, golden_md, sizeof(golden_md));
	md[4] = 0; /* the PSN, imm >> 12, big-endian */
	md[5] = (uint8_t)(imm >> 28);
	md[6] = (uint8_t)(imm >> 20);
	md[7] = (uint8_t)(imm >> 12);
	md[34] = (uint8_t)(fn >> 8);
	md[35] = (uint8_t)fn;
	assert_int_equal(ql_hsb_client_send_raw(x->cl, (uint64_t)page * PAGE_SIZE + moff, imm, md,
						sizeof(md)),
			 0);
}

/* A board's frames, PSN in the immediate's upper bits, first frame on
 * page 1 as NVIDIA's emulator sends it: handed on as page = imm & 0xFFF,
 * frame_len bytes (not the 128 of the metadata write), the metadata and
 * PSN readable; answered through the daemon, every one. A page past the
 * pages with PSN bits set: refused (bad_imm). */
static void test_board_frames(void **state)
{
	struct hx *x = *state;
	struct ql_hsb_channel_stats cs;
	struct ql_hsb_frame_info fi;
	struct ql_buffer *b[4];
	uint8_t req[PAGE_SIZE], resp[RESP_SIZE];
	uint32_t flen = x->hp.frame_len, arg = flen - QL_RPC_HEADER_SIZE;
	uint64_t end = now_ms() + TIMEOUT_MS;
	int n = 0;

	assert_int_equal(flen, PAGE_SIZE - 128); /* the default: the largest */
	memset(req, 0, sizeof(req));
	make_req(req, "rpc_increment", 600, 0x600, arg);
	/* page 1, data PSNs 0 and 1 (64-byte packets), metadata PSN 2 */
	board_frame(x, 1, 0x00002001u, 1, req, 64);
	while (n == 0 && now_ms() < end)
		n = ql_channel_receive_burst(x->ch, b, 4);
	assert_int_equal(n, 1);
	assert_int_equal(b[0]->index, 1);
	assert_int_equal(b[0]->len, flen);
	assert_memory_equal(b[0]->base, req, flen);
	assert_int_equal(ql_hsb_channel_frame_info(x->ch, b[0], &fi), 0);
	assert_int_equal(fi.page, 1);
	assert_int_equal(fi.psn, 2);
	assert_int_equal(fi.md.psn, 2);
	assert_int_equal(fi.md.frame_number, 1);
	assert_true(fi.md.bytes_written == 128);
	assert_true(fi.md.timestamp_s == 0x65432100ull);
	assert_int_equal(fi.md.timestamp_ns, 123456789);
	assert_int_equal(fi.md.crc, 0xdeadbeef);
	ql_channel_release_buffer(x->ch, b[0]);
	assert_int_equal(ql_hsb_channel_frame_info(x->ch, b[0], &fi), -EINVAL); /* given back */
	/* answered: page 2 (PSNs 3..5), and page 3 with the PSN at its top */
	make_req(req, "rpc_increment", 601, 0x601, arg);
	board_frame(x, 2, 0x00005002u, 2, req, 64);
	check_inc(resp, wait_resp(x, resp, sizeof(resp), TIMEOUT_MS), 601, 0x601, arg);
	make_req(req, "rpc_increment", 602, 0x602, 8);
	board_frame(x, 3, 0xfffff003u, 3, req, 128);
	check_inc(resp, wait_resp(x, resp, sizeof(resp), TIMEOUT_MS), 602, 0x602, 8);
	/* page 8 of 8 pages, PSN 7: refused, nothing answered */
	board_frame(x, 0, 0x00007000u | PAGES, 4, req, 128);
	expect_silence(x);
	assert_int_equal(ql_hsb_channel_stats(x->ch, &cs), 0);
	assert_int_equal(cs.frames, 3);
	assert_int_equal(cs.bad_imm, 1);
	assert_int_equal(cs.bad_len + cs.not_imm + cs.page_busy + cs.recv_errors, 0);
	one_call(x, 8);
}

/* Frames as long as the geometry allows (frame_len = page - 128, the
 * metadata right after): with the window full for two laps, every frame
 * answered and checked (16 of 16; with frame_len = page size a board's
 * metadata lands on the next page's frame). */
static void test_full_frames(void **state)
{
	struct hx *x = *state;
	struct ql_hsb_channel_stats cs;
	uint8_t req[PAGE_SIZE], resp[RESP_SIZE];
	const uint32_t arg = x->hp.frame_len - QL_RPC_HEADER_SIZE, total = 2 * PAGES;
	uint32_t sent = 0, got = 0;

	assert_int_equal(ql_hsb_client_max_msg(x->cl), x->hp.frame_len);
	assert_int_equal(ql_hsb_client_send(x->cl, req, x->hp.frame_len + 1), -EMSGSIZE);
	while (got < total) {
		while (sent < total) {
			uint32_t len = make_req(req, "rpc_increment", 3000 + sent, sent, arg);
			int r = ql_hsb_client_send(x->cl, req, len);

			if (r == -EAGAIN)
				break;
			assert_int_equal(r, 0);
			sent++;
		}
		check_inc(resp, wait_resp(x, resp, sizeof(resp), TIMEOUT_MS), 3000 + got, got, arg);
		got++;
	}
	assert_int_equal(ql_hsb_channel_stats(x->ch, &cs), 0);
	assert_int_equal(cs.frames, total);
	assert_int_equal(cs.bad_imm + cs.bad_len + cs.not_imm + cs.page_busy + cs.recv_errors, 0);
}

/* The client takes back only buffers it handed out, once each. */
static void test_client_release_twice(void **state)
{
	struct hx *x = *state;
	uint8_t req[PAGE_SIZE];
	struct ql_ring_response r, fake;
	uint64_t end = now_ms() + TIMEOUT_MS;
	int n = 0;

	assert_int_equal(ql_hsb_client_send(x->cl, req, make_req(req, "rpc_increment", 5, 5, 4)),
			 0);
	while (n == 0 && now_ms() < end) {
		assert_true(ql_daemon_poll(x->d) >= 0);
		n = ql_hsb_client_poll(x->cl, &r, 1);
		assert_true(n >= 0);
	}
	assert_int_equal(n, 1);
	fake = r;
	fake.slot = r.slot + 1; /* posted, never polled out */
	assert_int_equal(ql_hsb_client_release(x->cl, &fake), -EINVAL);
	fake.slot = 1u << 20;
	assert_int_equal(ql_hsb_client_release(x->cl, &fake), -EINVAL);
	assert_int_equal(ql_hsb_client_release(x->cl, &r), 0);
	assert_int_equal(ql_hsb_client_release(x->cl, &r), -EINVAL);
	x->next_id = 10;
	for (int i = 0; i < 4 * 16; i++) /* laps of the 16 receive buffers */
		one_call(x, 4);
}

/* Bad magic, unknown function and bad length (a header claiming more
 * argument bytes than the frame holds) under drop: no response, counted by
 * kind and in dropped, page released; then fine. A short frame cannot
 * happen: the frame is always frame_len bytes (the client pads it), what
 * the board was told to write, whatever the bytes say. */
static void test_bad_requests_drop(void **state)
{
	struct hx *x = *state;
	struct ql_daemon_stats st;
	uint8_t req[PAGE_SIZE], resp[RESP_SIZE];
	uint32_t len;

	for (int i = 0; i < PAGES + 1; i++) {
		len = make_req(req, "rpc_increment", 90, 0, 8);
		req[0] ^= 0xff; /* bad magic */
		assert_int_equal(ql_hsb_client_send(x->cl, req, len), 0);
		expect_silence(x);
		ql_hsb_client_forget(x->cl, 1);
		len = make_req(req, "no_such_function", 91, 0, 8);
		assert_int_equal(ql_hsb_client_send(x->cl, req, len), 0);
		expect_silence(x);
		ql_hsb_client_forget(x->cl, 1);
		/* 10 bytes, padded: a zero arg_len, served as a call */
		len = make_req(req, "rpc_increment", 93, 0, 0);
		assert_int_equal(ql_hsb_client_send(x->cl, req, 10), 0);
		assert_true(wait_resp(x, resp, sizeof(resp), TIMEOUT_MS) > 0);
		/* arg_len one past the frame (frame_len - 24 is the most) */
		len = make_req(req, "rpc_increment", 92, 0, 8);
		req[8] = (uint8_t)(x->hp.frame_len - QL_RPC_HEADER_SIZE + 1);
		req[9] = (uint8_t)((x->hp.frame_len - QL_RPC_HEADER_SIZE + 1) >> 8);
		assert_int_equal(ql_hsb_client_send(x->cl, req, len), 0); /* bad length */
		expect_silence(x);
		ql_hsb_client_forget(x->cl, 1);
	}
	ql_daemon_stats(x->d, &st);
	assert_int_equal(st.err_bad_magic, PAGES + 1);
	assert_int_equal(st.err_unknown_function, PAGES + 1);
	assert_int_equal(st.err_short, 0);
	assert_int_equal(st.err_bad_length, PAGES + 1);
	assert_int_equal(st.dropped, 3 * (PAGES + 1));
	for (int i = 0; i < PAGES + 1; i++)
		one_call(x, 8);
}

/* The same under answer: the status, request_id and ptp echoed. */
static void test_bad_requests_answer(void **state)
{
	struct hx *x = *state;
	struct ql_daemon_stats st;
	struct ql_rpc_response r;
	uint8_t req[PAGE_SIZE], resp[RESP_SIZE];
	uint32_t len;
	int n;

	len = make_req(req, "rpc_increment", 90, 0xabcdef, 8);
	req[0] ^= 0xff;
	assert_int_equal(ql_hsb_client_send(x->cl, req, len), 0);
	n = wait_resp(x, resp, sizeof(resp), TIMEOUT_MS);
	assert_int_equal(n, QL_RPC_RESPONSE_SIZE);
	ql_rpc_response_decode(resp, &r);
	assert_int_equal(r.status, QL_RPC_E_BAD_MAGIC);
	assert_int_equal(r.request_id, 90);
	assert_true(r.ptp_timestamp == 0xabcdef);
	len = make_req(req, "no_such_function", 91, 5, 8);
	assert_int_equal(ql_hsb_client_send(x->cl, req, len), 0);
	n = wait_resp(x, resp, sizeof(resp), TIMEOUT_MS);
	ql_rpc_response_decode(resp, &r);
	assert_int_equal(r.status, QL_RPC_E_UNKNOWN_FUNCTION);
	assert_int_equal(r.request_id, 91);
	stats_after_sends(x, 2, &st);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.responses, 2);
	one_call(x, 8);
}

/* A handler's results beyond the QCS's receive buffer: RESULT_OVERFLOW,
 * a 24-byte response, under either policy; nothing larger than RESP_SIZE
 * ever arrives. */
static void test_response_too_large(void **state)
{
	struct hx *x = *state;
	struct ql_rpc_response r;
	uint8_t req[PAGE_SIZE], resp[RESP_SIZE];
	uint32_t len = make_req(req, "flood", 95, 3, 0);
	int n;

	assert_int_equal(ql_hsb_client_send(x->cl, req, len), 0);
	n = wait_resp(x, resp, sizeof(resp), TIMEOUT_MS);
	assert_int_equal(n, QL_RPC_RESPONSE_SIZE);
	ql_rpc_response_decode(resp, &r);
	assert_int_equal(r.status, QL_RPC_E_RESULT_OVERFLOW);
	assert_int_equal(r.request_id, 95);
	/* 232 result bytes fill the 256-byte buffer exactly */
	one_call(x, RESP_SIZE - QL_RPC_RESPONSE_SIZE);
}

/* The client refuses a host whose responses its buffers cannot hold. */
static void test_client_recv_too_small(void **state)
{
	struct hx *x = *state;
	struct ql_hsb_client_config c = { .recv_buffers = 4, .recv_size = 64 };
	struct ql_hsb_client *cl;

	assert_int_equal(ql_hsb_client_create(x->dc, &c, &cl), 0);
	assert_int_equal(ql_hsb_client_connect(cl, &x->hp, NULL), -EINVAL);
	ql_hsb_client_destroy(cl);
}

static void test_params(void **state)
{
	struct ql_hsb_params p = { .qpn = 0x12,
				   .mtu = IBV_MTU_4096,
				   .rkey = 0xabc,
				   .page_addr = 0,
				   .page_size = 384,
				   .num_pages = 64,
				   .frame_len = 256,
				   .resp_size = 256 };
	struct ql_hsb_params q;
	char buf[512];

	(void)state;
	p.gid.raw[10] = p.gid.raw[11] = 0xff;
	p.gid.raw[12] = 10;
	p.gid.raw[15] = 2;
	assert_int_equal(ql_hsb_params_check(&p), 0);
	assert_true(ql_hsb_params_format(&p, buf, sizeof(buf)) > 0);
	assert_int_equal(ql_hsb_params_parse(buf, &q), 0);
	assert_int_equal(q.qpn, p.qpn);
	assert_memory_equal(q.gid.raw, p.gid.raw, 16);
	assert_int_equal(q.rkey, p.rkey);
	assert_true(q.page_addr == 0);
	assert_int_equal(q.page_size, 384);
	assert_int_equal(q.num_pages, 64);
	assert_int_equal(q.frame_len, 256);
	assert_int_equal(q.resp_size, 256);
	assert_int_equal(q.mtu, IBV_MTU_4096);

	q = p, q.page_size = 200;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	q = p, q.page_size = 0;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	q = p, q.num_pages = 0;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	q = p, q.num_pages = 4097;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	q = p, q.page_addr = 64;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	q = p, q.page_addr = (1ull << 39) - 384 * 63;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	q = p, q.page_addr = (1ull << 39) - 384 * 64;
	assert_int_equal(ql_hsb_params_check(&q), 0);
	q = p, q.frame_len = 385;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	/* the geometry rule: round_up(frame, 128) + 128 of metadata in a page
	 * (a 384-byte page holds a frame of up to 256, not 257 or 384) */
	q = p, q.frame_len = 257;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "frame length 257 needs pages of at least 512"));
	q = p, q.frame_len = 384;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	q = p, q.frame_len = 24;
	assert_int_equal(ql_hsb_params_check(&q), 0);
	q = p, q.frame_len = 23;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	q = p, q.page_size = 128, q.frame_len = 24; /* no room for the metadata */
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	q = p, q.page_size = 256, q.frame_len = 128;
	assert_int_equal(ql_hsb_params_check(&q), 0);
	q = p, q.resp_size = 23;
	assert_int_equal(ql_hsb_params_check(&q), -EINVAL);
	/* text without frame_len/resp_size, or inconsistent length */
	assert_int_equal(ql_hsb_params_parse("qpn=1 gid=::1 slots=4 slot_size=128 length=512", &q),
			 -EINVAL);
	assert_int_equal(ql_hsb_params_parse("qpn=1 gid=::1 slots=4 slot_size=256 length=1000 "
					     "frame_len=128 resp_size=64",
					     &q),
			 -EINVAL);
	assert_int_equal(ql_hsb_params_parse("qpn=1 gid=::1 slots=4 slot_size=256 length=1024 "
					     "frame_len=128 resp_size=64",
					     &q),
			 0);
	assert_int_equal(ql_hsb_params_parse("qpn=1 gid=::1 slots=4 slot_size=256 length=1024 "
					     "frame_len=256 resp_size=64",
					     &q),
			 -EINVAL);
}

/* The data path on both sides: no allocation, lock or system call. */
static int hot_loop(void *arg)
{
	struct hx *x = arg;
	uint8_t req[PAGE_SIZE];

	for (uint32_t i = 0; i < 4 * PAGES; i++) {
		uint32_t len = make_req(req, "rpc_increment", 5000 + i, i, 32);
		struct ql_ring_response r;
		struct ql_rpc_response rh;
		long spins = 0;
		int n = 0;

		if (ql_hsb_client_send(x->cl, req, len))
			return -1;
		while (n == 0 && spins++ < 100000000L) {
			if (ql_daemon_poll(x->d) < 0)
				return -1;
			n = ql_hsb_client_poll(x->cl, &r, 1);
		}
		if (n != 1 || r.len != QL_RPC_RESPONSE_SIZE + 32)
			return -1;
		ql_rpc_response_decode(r.msg, &rh);
		if (rh.status || rh.request_id != 5000 + i || ql_hsb_client_release(x->cl, &r))
			return -1;
	}
	return 0;
}

static void test_hotpath(void **state)
{
	char why[256] = "";

	if (hp_check(hot_loop, *state, why, sizeof(why)))
		fail_msg("%s", why);
}

/* ---- across processes: the server in a child, a dispatcher thread --------- */

static void test_mp_shm(void **state)
{
	int p2c[2], c2p[2], status;
	char line[512];
	ssize_t n;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p2c), 0);
	assert_int_equal(pipe(c2p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct hx s = { 0 };
		struct ql_daemon_stats st;
		struct ql_hsb_channel_stats cs;
		struct ql_device_counters dcnt;
		struct ql_conn_params cp;
		char buf[512];
		int len;

		close(p2c[1]);
		close(c2p[0]);
		if (server_open(&s, &kinds[1], QL_BAD_REQUEST_DROP))
			_exit(2);
		len = ql_hsb_params_format(&s.hp, buf, sizeof(buf));
		if (len < 0 || write(c2p[1], buf, (size_t)len + 1) != len + 1)
			_exit(3);
		n = read(p2c[0], buf, sizeof(buf) - 1);
		if (n <= 0)
			_exit(4);
		buf[n] = '\0';
		if (ql_conn_params_parse(buf, &cp) || ql_hsb_channel_connect(s.ch, &cp, NULL) ||
		    ql_daemon_start(s.d))
			_exit(5);
		if (write(c2p[1], "ok", 3) != 3)
			_exit(6);
		n = read(p2c[0], buf, sizeof(buf)); /* "quit" */
		ql_daemon_stop(s.d);
		ql_daemon_stats(s.d, &st);
		ql_hsb_channel_stats(s.ch, &cs);
		ql_device_counters(s.ds, &dcnt);
		len = snprintf(buf, sizeof(buf), "%llu %llu %llu %llu %llu",
			       (unsigned long long)st.ok, (unsigned long long)st.dropped,
			       (unsigned long long)cs.bad_imm, (unsigned long long)st.err_bad_magic,
			       (unsigned long long)dcnt.uc_drop_access);
		if (write(c2p[1], buf, (size_t)len + 1) != len + 1)
			_exit(7);
		server_close(&s);
		_exit(0);
	}
	close(p2c[0]);
	close(c2p[1]);
	{
		struct hx x = { .k = &kinds[1], .next_id = 1 };
		struct ql_conn_params cp;
		uint8_t req[PAGE_SIZE];
		unsigned long long ok, dropped, bad_imm, bad_magic, drop_access;
		uint32_t len;

		n = read(c2p[0], line, sizeof(line) - 1);
		assert_true(n > 0);
		line[n] = '\0';
		assert_int_equal(ql_hsb_params_parse(line, &x.hp), 0);
		assert_true(x.hp.page_addr == 0);
		assert_int_equal(client_open(&x, &kinds[1]), 0);
		assert_int_equal(ql_hsb_client_local_params(x.cl, &cp), 0);
		assert_true(ql_conn_params_format(&cp, line, sizeof(line)) > 0);
		assert_int_equal(write(p2c[1], line, strlen(line) + 1), (ssize_t)strlen(line) + 1);
		n = read(c2p[0], line, sizeof(line));
		assert_int_equal(n, 3);
		assert_int_equal(ql_hsb_client_connect(x.cl, &x.hp, NULL), 0);
		for (int i = 0; i < 200; i++) {
			one_call(&x, (uint32_t)i % 64);
			if (i % 50 == 25) {
				/* hostile frames in between: dropped */
				len = make_req(req, "rpc_increment", 5, 0, 8);
				assert_int_equal(ql_hsb_client_send_raw(x.cl, 0, 1000, req, len),
						 0);
				expect_silence(&x);
				req[0] = 0;
				assert_int_equal(ql_hsb_client_send(x.cl, req, len), 0);
				expect_silence(&x);
				ql_hsb_client_forget(x.cl, 1);
				/* past the pages (iova 0 + region): the NIC drops it */
				assert_int_equal(ql_hsb_client_send_raw(x.cl, PAGES * PAGE_SIZE - 8,
									0, req, len),
						 0);
				expect_silence(&x);
			}
		}
		assert_int_equal(write(p2c[1], "quit", 5), 5);
		n = read(c2p[0], line, sizeof(line) - 1);
		assert_true(n > 0);
		line[n] = '\0';
		assert_int_equal(sscanf(line, "%llu %llu %llu %llu %llu", &ok, &dropped, &bad_imm,
					&bad_magic, &drop_access),
				 5);
		assert_int_equal(ok, 200);
		assert_int_equal(dropped, 4);
		assert_int_equal(bad_imm, 4);
		assert_int_equal(bad_magic, 4);
		assert_int_equal(drop_access, 4);
		client_close(&x);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(p2c[1]);
	close(c2p[0]);
}

/* ---- on the wire: soft+udp, the client's packets captured ---------------
 * The client's frames as RoCEv2 packets (the pcap= option of soft+udp
 * records each packet), checked against what the facts say a board sends,
 * field by field: UC RDMA WRITE ONLY (opcode 0x2A) per packet_size bytes,
 * each with its RETH (address page x page_size + offset, the host's rkey,
 * its length), then UC RDMA WRITE ONLY WITH IMMEDIATE (0x2B) of 128 bytes at
 * page + round_up(frame, 128), ImmDt = page | PSN << 12 big-endian, PSNs
 * 0, 1, 2, ... with no gap. */

#define W_PAGE 2048u
#define W_FRAME 1200u /* three packets of 512: 512, 512, 176; metadata at 1280 */
#define W_PKT 512u

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void test_wire_golden(void **state)
{
	struct ql_hsb_channel_config cc = {
		.num_pages = 4, .page_size = W_PAGE, .frame_len = W_FRAME, .resp_size = RESP_SIZE
	};
	struct ql_hsb_client_config ccfg = { .recv_buffers = 16,
					     .recv_size = RESP_SIZE,
					     .packet_size = W_PKT };
	struct ql_daemon_config dc = { .cpu = -1 };
	struct ql_rpc_function inc = { .name = "rpc_increment",
				       .id = ql_rpc_fnv1a("rpc_increment"),
				       .fn = h_increment };
	unsigned int pid = (unsigned int)getpid(), port = 23000 + pid % 20000;
	char suri[128], curi[256], pcap[64], cip[32];
	struct hx x = { 0 };
	struct ql_conn_params cp;
	uint8_t req[W_PAGE], resp[RESP_SIZE];
	static uint8_t file[1 << 20];
	size_t flen, off;
	uint32_t npkt = 0, ids[3] = { 11, 12, 13 };
	FILE *f;

	(void)state;
	snprintf(cip, sizeof(cip), "127.%u.%u.2", (pid >> 8) & 0xff, pid & 0xff);
	snprintf(suri, sizeof(suri), "soft+udp://127.%u.%u.1:%u", (pid >> 8) & 0xff, pid & 0xff,
		 port);
	snprintf(pcap, sizeof(pcap), "/tmp/test_hsb_wire_%u.pcap", pid);
	snprintf(curi, sizeof(curi), "soft+udp://%s:%u?pcap=%s", cip, port, pcap);
	x.next_id = 1;
	assert_int_equal(ql_device_open(suri, &x.ds), 0);
	assert_int_equal(ql_hsb_channel_create(x.ds, &cc, &x.ch), 0);
	assert_int_equal(ql_daemon_create(&dc, x.ch, &x.d), 0);
	assert_int_equal(ql_daemon_register(x.d, &inc), 0);
	assert_int_equal(ql_hsb_channel_local_params(x.ch, &x.hp), 0);
	assert_int_equal(ql_device_open(curi, &x.dc), 0);
	assert_int_equal(ql_hsb_client_create(x.dc, &ccfg, &x.cl), 0);
	assert_int_equal(ql_hsb_client_local_params(x.cl, &cp), 0);
	assert_int_equal(ql_hsb_channel_connect(x.ch, &cp, NULL), 0);
	assert_int_equal(ql_hsb_client_connect(x.cl, &x.hp, NULL), 0);
	assert_int_equal(ql_hsb_client_next_psn(x.cl), 0);
	for (int i = 0; i < 3; i++) {
		uint32_t len = make_req(req, "rpc_increment", ids[i], ids[i], 40);

		assert_int_equal(ql_hsb_client_send(x.cl, req, len), 0);
		check_inc(resp, wait_resp(&x, resp, sizeof(resp), TIMEOUT_MS), ids[i], ids[i], 40);
	}
	assert_int_equal(ql_hsb_client_next_psn(x.cl), 12);
	client_close(&x); /* flushes the capture */
	server_close(&x);

	f = fopen(pcap, "rb");
	assert_non_null(f);
	flen = fread(file, 1, sizeof(file), f);
	fclose(f);
	unlink(pcap);
	assert_true(flen > 24);
	for (off = 24; off + 16 <= flen;) {
		uint32_t incl;
		const uint8_t *e, *ip, *udp, *bth, *reth;
		uint32_t frame, k, psn, want_len, want_va;
		uint8_t op;

		memcpy(&incl, file + off + 8, 4); /* record header: host order */
		e = file + off + 16;
		off += 16 + incl;
		assert_true(off <= flen);
		ip = e + 14;
		udp = ip + 20;
		bth = udp + 8;
		{
			char src[32];

			snprintf(src, sizeof(src), "%u.%u.%u.%u", ip[12], ip[13], ip[14], ip[15]);
			if (strcmp(src, cip))
				continue; /* the host's responses */
		}
		op = bth[0];
		assert_true(op == 0x2a || op == 0x2b); /* UC WRITE ONLY [WITH IMMEDIATE] */
		psn = rd32(bth + 8) & 0xffffff;
		assert_int_equal(psn, npkt);			      /* from 0, no gap */
		assert_int_equal(rd32(bth + 4) & 0xffffff, x.hp.qpn); /* the host's QP */
		assert_int_equal(bth[2] << 8 | bth[3], 0xffff);	      /* P_Key */
		frame = npkt / 4;
		k = npkt % 4;
		reth = bth + 12;
		/* RETH: VA 8, R_Key 4, DMA length 4, big-endian */
		want_va = frame * W_PAGE + (k < 3 ? k * W_PKT : 1280);
		want_len = k < 2 ? W_PKT : k == 2 ? W_FRAME - 2 * W_PKT : 128;
		assert_int_equal(rd32(reth), 0);
		assert_int_equal(rd32(reth + 4), want_va);
		assert_int_equal(rd32(reth + 8), x.hp.rkey);
		assert_int_equal(rd32(reth + 12), want_len);
		assert_int_equal(udp[4] << 8 | udp[5],
				 8 + 12 + 16 + (k == 3 ? 4 : 0) + want_len + 4); /* + ICRC */
		if (k < 3) {
			/* the frame: the request, then zeros up to 1200 bytes */
			uint8_t want[W_FRAME] = { 0 };

			assert_int_equal(op, 0x2a);
			make_req(want, "rpc_increment", ids[frame], ids[frame], 40);
			assert_memory_equal(reth + 16, want + k * W_PKT, want_len);
		} else {
			const uint8_t *md = reth + 16 + 4;

			assert_int_equal(op, 0x2b);
			/* ImmDt: page | PSN << 12; the client starts at page 0 */
			assert_int_equal(rd32(reth + 16), frame | (4 * frame + 3) << 12);
			assert_int_equal(rd32(md + 4), 4 * frame + 3);	      /* psn */
			assert_int_equal(rd32(md + 24), 0);		      /* bytes_written */
			assert_int_equal(rd32(md + 28), W_FRAME);	      /* (low word) */
			assert_int_equal(md[34] << 8 | md[35], frame);	      /* frame_number */
			assert_true(rd32(md + 12) == 0 && rd32(md + 16) > 0); /* timestamp_s */
		}
		npkt++;
	}
	assert_int_equal(npkt, 12);
}

#define T(f, s) cmocka_unit_test_setup_teardown(f, s, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_golden_constants),
		T(test_board_frames, setup_loop_drop),
		T(test_board_frames, setup_shm_drop),
		T(test_full_frames, setup_loop_drop),
		T(test_full_frames, setup_shm_drop),
		cmocka_unit_test(test_wire_golden),
		T(test_roundtrip, setup_loop_drop),
		T(test_roundtrip, setup_shm_drop),
		T(test_bad_imm, setup_loop_drop),
		T(test_bad_imm, setup_shm_drop),
		T(test_bad_len, setup_loop_drop),
		T(test_bad_len, setup_shm_drop),
		T(test_full_window_laps, setup_loop_drop),
		T(test_full_window_laps, setup_shm_drop),
		T(test_page_busy, setup_loop_drop),
		T(test_page_busy, setup_shm_drop),
		T(test_client_release_twice, setup_loop_drop),
		T(test_client_release_twice, setup_shm_drop),
		T(test_bad_requests_drop, setup_loop_drop),
		T(test_bad_requests_drop, setup_shm_drop),
		T(test_bad_requests_answer, setup_loop_answer),
		T(test_bad_requests_answer, setup_shm_answer),
		T(test_response_too_large, setup_loop_drop),
		T(test_response_too_large, setup_shm_answer),
		T(test_client_recv_too_small, setup_loop_drop),
		T(test_hotpath, setup_loop_drop),
		T(test_hotpath, setup_shm_drop),
		cmocka_unit_test(test_mp_shm),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
