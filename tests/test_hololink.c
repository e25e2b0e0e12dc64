/* SPDX-License-Identifier: MIT */
/*
 * The Hololink register protocol (qlink/hololink.h): the client against the
 * emulated board over 127.0.0.1 (dword and block reads and writes, a
 * dropped reply recovered by a retransmission, silence reported with the
 * register address, every device status mapped to its errno), the
 * data-plane configuration with its readback in both register layouts (a
 * board that corrupts one register is caught, by name), a scripted board
 * that answers as NVIDIA's boards do (replies built here from
 * the facts in docs/hololink.md, byte for byte) and as an attacker would
 * (spoofed source, wrong sequence, reflected requests, bad status), the
 * requests the client sends byte for byte, hostile requests to the emulated
 * board, its replies to hand-built requests byte for byte, the ACK_REQUEST
 * rule, the start-up registers upstream's host writes, the allowlist,
 * enumeration packets, and docs/hololink.md's hex examples.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink/error.h"
#include "qlink/hololink.h"

/* ------------------------------------------------ the emulated board, threaded */

struct board {
	struct ql_hl_server *s;
	pthread_t t;
	atomic_int stop;
	atomic_int configured; /* callbacks seen */
	struct ql_hsb_dataplane dp;
	uint32_t vp;
};

/* The board's register at addr holds want. */
#define assert_reg(s, addr, want)                                           \
	do {                                                                \
		uint32_t reg_;                                              \
		assert_int_equal(ql_hl_server_peek((s), (addr), &reg_), 0); \
		assert_int_equal(reg_, (want));                             \
	} while (0)

static void on_configured(void *arg, uint32_t vp, const struct ql_hsb_dataplane *dp)
{
	struct board *b = arg;

	b->dp = *dp;
	b->vp = vp;
	atomic_fetch_add(&b->configured, 1);
}

static void *board_loop(void *arg)
{
	struct board *b = arg;

	while (!atomic_load(&b->stop))
		ql_hl_server_poll(b->s, 20);
	return NULL;
}

static void board_start(struct board *b, const struct ql_hl_server_config *cfg)
{
	memset(b, 0, sizeof(*b));
	assert_int_equal(ql_hl_server_create(cfg, on_configured, b, &b->s), 0);
	assert_int_equal(pthread_create(&b->t, NULL, board_loop, b), 0);
}

static void board_stop(struct board *b)
{
	atomic_store(&b->stop, 1);
	pthread_join(b->t, NULL);
	ql_hl_server_destroy(b->s);
}

static struct ql_hl *open_board(uint16_t port, uint32_t timeout_ms, uint32_t retries)
{
	struct ql_hl *h = NULL;

	assert_int_equal(ql_hl_open("127.0.0.1", port, timeout_ms, retries, &h), 0);
	return h;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#define VP0 QL_HSB_VP_BASE
#define HIF QL_HSB_HIF_BASE

static void test_dword_and_block(void **state)
{
	struct board b;
	struct ql_hl *h;
	struct ql_hl_reg w[3] = { { VP0 + QL_HSB_DP_QP, 0x11 },
				  { VP0 + QL_HSB_DP_RKEY, 0xdeadbeef },
				  { HIF + QL_HSB_DP_PACKET_UDP_PORT, 12288 } };
	struct ql_hl_reg r[3];
	struct ql_hl_stats st;
	uint32_t v = 1;

	(void)state;
	board_start(&b, NULL);
	h = open_board(ql_hl_server_port(b.s), 500, 3);
	/* unwritten registers read as 0 */
	assert_int_equal(ql_hl_read_dword(h, VP0 + QL_HSB_DP_RKEY, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(ql_hl_write_dword(h, VP0 + QL_HSB_DP_RKEY, 0x01020304), 0);
	assert_int_equal(ql_hl_read_dword(h, VP0 + QL_HSB_DP_RKEY, &v), 0);
	assert_int_equal(v, 0x01020304);
	assert_int_equal(ql_hl_write_block(h, w, 3), 0);
	for (int i = 0; i < 3; i++)
		r[2 - i] = (struct ql_hl_reg){ w[i].addr, 0 };
	assert_int_equal(ql_hl_read_block(h, r, 3), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(r[2 - i].value, w[i].value);
	assert_int_equal(ql_hl_read_dword(h, QL_HSB_REG_IP_VERSION, &v), 0);
	assert_int_equal(v, 0x2504);
	ql_hl_stats(h, &st);
	assert_int_equal(st.requests, 6);
	assert_int_equal(st.retransmits, 0);
	assert_int_equal(st.timeouts, 0);
	/* the client refuses what it cannot send, before sending */
	assert_int_equal(ql_hl_write_dword(h, VP0 + 2, 1), -EINVAL);
	assert_int_equal(ql_hl_write_block(h, w, 0), -EINVAL);
	assert_int_equal(ql_hl_read_block(h, r, QL_HL_BLOCK_MAX + 1), -EINVAL);
	ql_hl_stats(h, &st);
	assert_int_equal(st.requests, 6);
	ql_hl_close(h);
	board_stop(&b);
}

/* The board drops its 2nd reply (the write is done, the ack lost): the
 * client retransmits and the request succeeds. */
static void test_dropped_reply(void **state)
{
	struct ql_hl_server_config cfg = { .drop_reply = 2 };
	struct board b;
	struct ql_hl *h;
	struct ql_hl_stats st;
	uint32_t v;

	(void)state;
	board_start(&b, &cfg);
	/* long enough that only the dropped reply causes a retransmission */
	h = open_board(ql_hl_server_port(b.s), 300, 3);
	assert_int_equal(ql_hl_write_dword(h, VP0 + QL_HSB_DP_QP, 7), 0);
	assert_int_equal(ql_hl_write_dword(h, VP0 + QL_HSB_DP_RKEY, 8), 0);
	assert_int_equal(ql_hl_read_dword(h, VP0 + QL_HSB_DP_RKEY, &v), 0);
	assert_int_equal(v, 8);
	ql_hl_stats(h, &st);
	assert_int_equal(st.requests, 3);
	assert_int_equal(st.retransmits, 1);
	ql_hl_close(h);
	board_stop(&b);
}

/* Nobody answers: -ETIMEDOUT after 1 + retries tries, in bounded time, with
 * the register address and the board in the detail. */
static void test_timeout(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct ql_hl *h;
	struct ql_hl_stats st;
	uint64_t t0;
	uint32_t v;
	char want[64];

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	h = open_board(ntohs(a.sin_port), 30, 2);
	t0 = now_ms();
	assert_int_equal(ql_hl_read_dword(h, 0x1234, &v), -ETIMEDOUT);
	assert_true(now_ms() - t0 >= 85 && now_ms() - t0 < 2000);
	assert_non_null(strstr(ql_error_detail(), "0x00001234"));
	snprintf(want, sizeof(want), "127.0.0.1:%u", ntohs(a.sin_port));
	assert_non_null(strstr(ql_error_detail(), want));
	assert_non_null(strstr(ql_error_detail(), "3 tries"));
	ql_hl_stats(h, &st);
	assert_int_equal(st.retransmits, 2);
	assert_int_equal(st.timeouts, 1);
	ql_hl_close(h);
	close(fd);
	/* bad arguments */
	assert_int_equal(ql_hl_open("127.0.0.1", 1, 10, 17, &h), -EINVAL);
	assert_int_equal(ql_hl_open("", 1, 10, 1, &h), -EINVAL);
	assert_int_equal(ql_hl_open("no.such.host.invalid", 1, 10, 1, &h), -EHOSTUNREACH);
}

/* The emulated board's refusals, as the client reports them. */
static void test_board_refusals(void **state)
{
	struct board b;
	struct ql_hl *h;
	struct ql_hl_reg blk[2] = { { VP0 + QL_HSB_DP_QP, 5 }, { 0x7000, 1 } };
	uint32_t v;

	(void)state;
	board_start(&b, NULL);
	h = open_board(ql_hl_server_port(b.s), 500, 2);
	/* no register there */
	assert_int_equal(ql_hl_write_dword(h, 0x7000, 1), -EFAULT);
	assert_non_null(strstr(ql_error_detail(), "status 0x03 (invalid address)"));
	assert_non_null(strstr(ql_error_detail(), "0x00007000"));
	assert_int_equal(ql_hl_read_dword(h, 0x7000, &v), -EFAULT);
	/* VP 1 does not exist on a one-VP board */
	assert_int_equal(ql_hl_write_dword(h, VP0 + QL_HSB_VP_STRIDE, 1), -EFAULT);
	/* read-only */
	assert_int_equal(ql_hl_write_dword(h, QL_HSB_REG_IP_VERSION, 1), -EFAULT);
	/* registers take any value, as a board's do (DP_MAX_BUFF bits 27..16
	 * are a start page on NVIDIA's emulator) ... */
	assert_int_equal(ql_hl_write_dword(h, VP0 + QL_HSB_DP_MAX_BUFF, 0x10000), 0);
	assert_int_equal(ql_hl_write_dword(h, VP0 + QL_HSB_DP_PAGE_MSB, 0x80), 0);
	assert_int_equal(ql_hl_write_dword(h, VP0 + QL_HSB_DP_QP, 0x1000000), 0);
	/* ... but a VP is enabled only with a configuration that can run */
	assert_int_equal(ql_hl_write_dword(h, HIF + QL_HSB_DP_VP_MASK, 2), -EIO);
	assert_non_null(strstr(ql_error_detail(), "general error"));
	assert_int_equal(ql_hl_write_dword(h, HIF + QL_HSB_DP_VP_MASK, 1), -EIO);
	/* a block with one bad register changes nothing */
	assert_int_equal(ql_hl_write_block(h, blk, 2), -EFAULT);
	assert_int_equal(ql_hl_read_dword(h, VP0 + QL_HSB_DP_QP, &v), 0);
	assert_int_equal(v, 0x1000000);
	ql_hl_close(h);
	board_stop(&b);
}

/* ------------------------------------------------------- a scripted board */

enum mode {
	M_STATUS,    /* answer every request with status `code` */
	M_NOISE,     /* runt, request opcode, stale sequence + error, then the answer */
	M_SHORT,     /* right sequence, too short for its pairs */
	M_BAD_ECHO,  /* a reply echoing another address */
	M_OTHER_SRC, /* the answer, from 127.0.0.2 (a spoofer) */
	M_WRONG_SEQ, /* the answer with another sequence number */
	M_REFLECT,   /* the request itself sent back */
	M_BARE,	     /* the answer without the trailer (tolerated) */
};

static struct {
	int fd, other;
	uint16_t port;
	pthread_t t;
	atomic_int mode, code, stop;
	uint8_t last[QL_HL_DGRAM_MAX];
	size_t last_len;
} fake;

/* A reply as docs/hololink.md's "Replies" says a board sends it: request
 * opcode | 0x80, the request's flags and sequence, status, a reserved byte,
 * the request's pairs echoed (a read's with the value 0xabababab), a 4-byte
 * trailer of zeros. */
static size_t fake_reply(const uint8_t *q, size_t n, uint8_t code, uint8_t *r)
{
	size_t pairs = q[0] == QL_HL_RD_DWORD ? 1 : q[0] == QL_HL_WR_DWORD ? 1 : (n - 6) / 8;

	r[0] = (uint8_t)(q[0] | 0x80);
	r[1] = q[1];
	r[2] = q[2];
	r[3] = q[3];
	r[4] = code;
	r[5] = 0;
	for (size_t i = 0; i < pairs; i++) {
		memcpy(r + 6 + 8 * i, q + 6 + (q[0] == QL_HL_RD_DWORD ? 0 : 8 * i), 4);
		if (q[0] == QL_HL_RD_DWORD || q[0] == QL_HL_RD_BLOCK)
			memset(r + 10 + 8 * i, 0xab, 4);
		else
			memcpy(r + 10 + 8 * i, q + 10 + 8 * i, 4);
	}
	memset(r + 6 + 8 * pairs, 0, 4);
	return 6 + 8 * pairs + 4;
}

static void *fake_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&fake.stop)) {
		struct pollfd pfd = { .fd = fake.fd, .events = POLLIN };
		uint8_t q[QL_HL_DGRAM_MAX], r[QL_HL_DGRAM_MAX + 8], x[QL_HL_DGRAM_MAX + 8];
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n;
		size_t rl;

		if (poll(&pfd, 1, 20) <= 0)
			continue;
		n = recvfrom(fake.fd, q, sizeof(q), 0, (struct sockaddr *)&from, &flen);
		if (n < 10)
			continue;
		memcpy(fake.last, q, (size_t)n);
		fake.last_len = (size_t)n;
		rl = fake_reply(q, (size_t)n, 0, r);
		switch (atomic_load(&fake.mode)) {
		case M_STATUS:
			r[4] = (uint8_t)atomic_load(&fake.code);
			break;
		case M_NOISE:
			sendto(fake.fd, r, 3, 0, (struct sockaddr *)&from, flen); /* runt */
			memcpy(x, r, rl);
			x[0] &= 0x7f; /* the request's opcode */
			sendto(fake.fd, x, rl, 0, (struct sockaddr *)&from, flen);
			memcpy(x, r, rl);
			x[3] ^= 0x55; /* a stale sequence number */
			x[4] = QL_HL_ERR_GENERAL;
			sendto(fake.fd, x, rl, 0, (struct sockaddr *)&from, flen);
			break;
		case M_SHORT:
			rl = 6 + 4; /* status ok, no pairs */
			break;
		case M_BAD_ECHO:
			r[9] ^= 4;
			break;
		case M_OTHER_SRC:
			sendto(fake.other, r, rl, 0, (struct sockaddr *)&from, flen);
			continue;
		case M_WRONG_SEQ:
			r[3] ^= 1;
			break;
		case M_REFLECT:
			memcpy(r, q, (size_t)n);
			rl = (size_t)n;
			break;
		case M_BARE:
			rl -= 4;
			break;
		}
		sendto(fake.fd, r, rl, 0, (struct sockaddr *)&from, flen);
	}
	return NULL;
}

static int fake_setup(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);

	(void)state;
	memset(&fake, 0, sizeof(fake));
	fake.fd = socket(AF_INET, SOCK_DGRAM, 0);
	fake.other = socket(AF_INET, SOCK_DGRAM, 0);
	if (fake.fd < 0 || fake.other < 0 || bind(fake.fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fake.fd, (struct sockaddr *)&a, &alen))
		return -1;
	fake.port = ntohs(a.sin_port);
	/* the spoofer: another address, the board's port */
	{
		struct sockaddr_in o = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(0x7f000002),
					 .sin_port = a.sin_port };

		if (bind(fake.other, (struct sockaddr *)&o, sizeof(o)))
			return -1;
	}
	return pthread_create(&fake.t, NULL, fake_loop, NULL);
}

static int fake_teardown(void **state)
{
	(void)state;
	atomic_store(&fake.stop, 1);
	pthread_join(fake.t, NULL);
	close(fake.fd);
	close(fake.other);
	return 0;
}

/* Every status a board can report, mapped to an errno, with the code and its
 * name in the detail; and the request bytes the client sends. */
static void test_status_mapping(void **state)
{
	static const struct {
		uint8_t code;
		int err;
		const char *name;
	} map[] = {
		{ QL_HL_ERR_GENERAL, -EIO, "general error" },
		{ QL_HL_ERR_ADDRESS, -EFAULT, "invalid address" },
		{ QL_HL_ERR_COMMAND, -EOPNOTSUPP, "invalid command" },
		{ QL_HL_ERR_LENGTH, -EMSGSIZE, "bad packet length" },
		{ QL_HL_ERR_FLAGS, -EINVAL, "invalid flags" },
		{ QL_HL_ERR_BUFFER_FULL, -ENOBUFS, "buffer full" },
		{ 0x01, -EPROTO, "unknown status" },
		{ 0xff, -EPROTO, "unknown status" },
	};
	/* requests as upstream's host sends them (hand-built from the facts):
	 * the first without SEQUENCE_CHECK, then flags 0x03, one number each */
	static const uint8_t wr_first[14] = { 0x04, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00,
					      0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x02 };
	static const uint8_t rd_next[10] = { 0x14, 0x03, 0x01, 0x01, 0x00,
					     0x00, 0x00, 0x00, 0x10, 0x00 };
	static const uint8_t wb_next[22] = { 0x09, 0x03, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00,
					     0x10, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
					     0x10, 0x04, 0x00, 0x00, 0x00, 0x03 };
	const struct ql_hl_reg two[2] = { { 0x1000, 2 }, { 0x1004, 3 } };
	struct ql_hl *h = open_board(fake.port, 500, 1);
	char want[32];
	uint32_t v;

	(void)state;
	atomic_store(&fake.mode, M_STATUS);
	atomic_store(&fake.code, 0);
	ql_hl_set_sequence(h, 0x100, true);
	assert_int_equal(ql_hl_write_dword(h, 0x1000, 2), 0);
	assert_int_equal(fake.last_len, sizeof(wr_first));
	assert_memory_equal(fake.last, wr_first, sizeof(wr_first));
	assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), 0);
	assert_int_equal(v, 0xabababab);
	assert_int_equal(fake.last_len, sizeof(rd_next));
	assert_memory_equal(fake.last, rd_next, sizeof(rd_next));
	assert_int_equal(ql_hl_write_block(h, two, 2), 0);
	assert_int_equal(fake.last_len, sizeof(wb_next));
	assert_memory_equal(fake.last, wb_next, sizeof(wb_next));
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		atomic_store(&fake.code, map[i].code);
		assert_int_equal(ql_hl_write_dword(h, 0x1000, 2), map[i].err);
		snprintf(want, sizeof(want), "status 0x%02x (%s)", map[i].code, map[i].name);
		assert_non_null(strstr(ql_error_detail(), want));
		assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), map[i].err);
		assert_int_equal(ql_hl_status_errno(map[i].code), map[i].err);
	}
	ql_hl_close(h);
}

/* Hostile replies: noise is ignored and counted by reason; a reply with
 * our sequence number but too short or echoing another address is ignored
 * too (it may be forged), as are replies from another address, with another
 * sequence number, or our own request reflected; the failure says how many
 * replies were ignored and why. A reply without the trailer is tolerated. */
static void test_hostile_replies(void **state)
{
	struct ql_hl *h = open_board(fake.port, 500, 1);
	struct ql_hl_stats st;
	uint32_t v = 0;

	(void)state;
	atomic_store(&fake.mode, M_NOISE);
	assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), 0);
	assert_int_equal(v, 0xabababab);
	assert_int_equal(ql_hl_write_dword(h, 0x1000, 1), 0);
	ql_hl_stats(h, &st);
	assert_int_equal(st.ignored, 6);
	assert_int_equal(st.malformed, 2);
	assert_int_equal(st.wrong_opcode, 2);
	assert_int_equal(st.wrong_sequence, 2);
	atomic_store(&fake.mode, M_BARE);
	assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), 0);
	assert_int_equal(ql_hl_write_dword(h, 0x1000, 1), 0);
	ql_hl_close(h);

	h = open_board(fake.port, 60, 1);
	atomic_store(&fake.mode, M_SHORT);
	assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), -ETIMEDOUT);
	assert_non_null(strstr(ql_error_detail(), "2 replies ignored: 2 malformed"));
	atomic_store(&fake.mode, M_BAD_ECHO);
	assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), -ETIMEDOUT);
	assert_non_null(strstr(ql_error_detail(), "2 replies ignored: 2 malformed"));
	/* a spoofed write ack: right bytes, wrong source */
	atomic_store(&fake.mode, M_OTHER_SRC);
	assert_int_equal(ql_hl_write_dword(h, 0x1000, 1), -ETIMEDOUT);
	assert_non_null(
		strstr(ql_error_detail(), "2 replies ignored: 2 from another address (127.0.0.2)"));
	/* a write ack with a wrong sequence number */
	atomic_store(&fake.mode, M_WRONG_SEQ);
	assert_int_equal(ql_hl_write_dword(h, 0x1000, 1), -ETIMEDOUT);
	assert_non_null(
		strstr(ql_error_detail(), "2 replies ignored: 2 with another sequence number"));
	/* the request reflected back: status byte 0, right sequence, not an ack */
	atomic_store(&fake.mode, M_REFLECT);
	assert_int_equal(ql_hl_write_dword(h, 0x1000, 1), -ETIMEDOUT);
	assert_non_null(strstr(ql_error_detail(), "2 replies ignored: 2 with another opcode"));
	ql_hl_stats(h, &st);
	assert_int_equal(st.wrong_source, 2);
	assert_int_equal(st.timeouts, 5);
	/* a bad status with the right sequence is the board's answer */
	atomic_store(&fake.mode, M_STATUS);
	atomic_store(&fake.code, QL_HL_ERR_ADDRESS);
	assert_int_equal(ql_hl_write_dword(h, 0x1000, 1), -EFAULT);
	ql_hl_close(h);
}

/* A board on loopback bound to INADDR_ANY answers from 127.0.0.1 whatever
 * loopback address was asked: the client (not connected) takes it. */
static void test_loopback_any(void **state)
{
	struct ql_hl_server_config cfg = { .address = "0.0.0.0" };
	struct board b;
	struct ql_hl *h = NULL;
	uint32_t v = 0;

	(void)state;
	board_start(&b, &cfg);
	assert_int_equal(ql_hl_open("127.0.0.2", ql_hl_server_port(b.s), 300, 1, &h), 0);
	assert_int_equal(ql_hl_read_dword(h, QL_HSB_REG_IP_VERSION, &v), 0);
	assert_int_equal(v, 0x2504);
	ql_hl_close(h);
	board_stop(&b);
}

/* ------------------------------------------------------ data-plane configure */

static void sample_dp(struct ql_hsb_dataplane *dp)
{
	static const uint8_t gid[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1 };

	memset(dp, 0, sizeof(*dp));
	dp->qpn = 0x11;
	dp->rkey = 0x2233;
	dp->page_addr = 0x12345600 & ~127ull;
	dp->page_addr |= 1ull << 36;
	dp->page_inc = 384;
	dp->num_pages = 64;
	dp->frame_len = 256; /* + its 128 bytes of metadata: the page */
	memcpy(dp->gid, gid, 16);
	memcpy(dp->mac, "\x02\x11\x22\x33\x44\x55", 6);
	dp->udp_port = 4791;
	dp->mtu = 1500;
	dp->src_port = 12288;
}

/* What the board reports is what the host wrote; the MTU comes back as the
 * largest one DP_PACKET_SIZE allows. */
static void assert_dp_equal(const struct ql_hsb_dataplane *a, const struct ql_hsb_dataplane *b)
{
	assert_int_equal(a->qpn, b->qpn);
	assert_int_equal(a->rkey, b->rkey);
	assert_int_equal(a->page_addr, b->page_addr);
	assert_int_equal(a->page_inc, b->page_inc);
	assert_int_equal(a->num_pages, b->num_pages);
	assert_int_equal(a->frame_len, b->frame_len);
	assert_memory_equal(a->gid, b->gid, 16);
	assert_memory_equal(a->mac, b->mac, 6);
	assert_int_equal(a->udp_port, b->udp_port);
	assert_int_equal(a->src_port, b->src_port);
	assert_int_equal((a->mtu - QL_HSB_ROCE_OVERHEAD) / QL_HSB_PAGE,
			 (b->mtu - QL_HSB_ROCE_OVERHEAD) / QL_HSB_PAGE);
}

static void test_configure(void **state)
{
	struct ql_hl_server_config cfg = { .num_vps = 2 };
	struct ql_hsb_target t = { .vp = 1 };
	struct ql_hsb_dataplane dp, got;
	struct ql_hl_reg regs[QL_HSB_CONFIG_REGS];
	struct board b;
	struct ql_hl *h;
	uint32_t v = 0;

	(void)state;
	sample_dp(&dp);
	board_start(&b, &cfg);
	h = open_board(ql_hl_server_port(b.s), 500, 2);
	assert_int_equal(ql_hl_server_dataplane(b.s, 1, &got), -EAGAIN);
	assert_int_equal(ql_hsb_configure(h, &t, &dp, &v), 0);
	assert_int_equal(v, 0x2504);
	assert_int_equal(atomic_load(&b.configured), 1);
	assert_int_equal(b.vp, 1);
	assert_dp_equal(&b.dp, &dp);
	/* DP_PACKET_SIZE from the Ethernet MTU: (1500 - 74) / 128 = 11 */
	assert_int_equal(b.dp.packet_size, 11 * 128);
	assert_int_equal(b.dp.mtu, 11 * 128 + 74);
	assert_int_equal(ql_hl_server_dataplane(b.s, 1, &got), 0);
	assert_dp_equal(&got, &dp);
	assert_int_equal(ql_hl_server_dataplane(b.s, 0, &got), -EAGAIN);
	/* register values as the map says (2.6: LSB the low 32 bits of base) */
	assert_reg(b.s, 0x1040 + QL_HSB_DP_PAGE_LSB, 0x12345600);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_PAGE_MSB, 0x10);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_BUFFER_LENGTH, 256);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_PAGE_INC, 3);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_MAX_BUFF, 63);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_HOST_IP, 0x0a000001);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_HOST_MAC_LOW, 0x22334455);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_HOST_MAC_HIGH, 0x0211);
	assert_reg(b.s, 0x02000300 + 0x04, 11);
	assert_reg(b.s, 0x02000300 + 0x08, 12288);
	assert_reg(b.s, 0x02000300 + 0x0c, 2);
	/* an enabled VP's registers cannot change under it */
	assert_int_equal(ql_hl_write_dword(h, 0x1040 + QL_HSB_DP_RKEY, 1), -EIO);
	/* reconfiguring (clear, write, set) works and reports again */
	dp.rkey = 0x4455;
	assert_int_equal(ql_hsb_configure(h, &t, &dp, NULL), 0);
	assert_int_equal(atomic_load(&b.configured), 2);
	assert_int_equal(b.dp.rkey, 0x4455);
	/* 2.6 addresses 64 bits; the 2.5 layout (page numbers) below 2^39 */
	dp.page_addr = 1ull << 39;
	assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, regs, QL_HSB_CONFIG_REGS),
			 QL_HSB_CONFIG_REGS);
	t.layout = QL_HSB_LAYOUT_2_5;
	assert_int_equal(ql_hsb_configure(h, &t, &dp, NULL), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "2^39"));
	t.layout = QL_HSB_LAYOUT_2_6;
	sample_dp(&dp);
	dp.mtu = 150; /* no room for a 128-byte payload */
	assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, regs, QL_HSB_CONFIG_REGS), -EINVAL);
	sample_dp(&dp);
	dp.page_inc = 200;
	assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, regs, QL_HSB_CONFIG_REGS), -EINVAL);
	sample_dp(&dp);
	dp.frame_len = 385;
	assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, regs, QL_HSB_CONFIG_REGS), -EINVAL);
	sample_dp(&dp);
	dp.gid[10] = 0;
	assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, regs, QL_HSB_CONFIG_REGS), -EINVAL);
	sample_dp(&dp);
	dp.num_pages = 4097;
	assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, regs, QL_HSB_CONFIG_REGS), -EINVAL);
	sample_dp(&dp);
	t.vp = 32;
	assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, regs, QL_HSB_CONFIG_REGS), -EINVAL);
	/* the one-call form qlinkd uses */
	t.vp = 0;
	assert_int_equal(ql_hsb_configure_board("127.0.0.1", ql_hl_server_port(b.s), &t, &dp, 500,
						2, NULL),
			 0);
	assert_int_equal(ql_hl_server_dataplane(b.s, 0, &got), 0);
	assert_dp_equal(&got, &dp);
	/* a GID that is not IPv4-mapped (soft): DP_HOST_IP 127.0.0.1 and the
	 * whole GID in the qlink extension at 0x7F000000 + 0x10 x VP, outside
	 * the VP block (VP+0x34 is a real board's VLAN register) */
	{
		struct ql_hl_reg xr[QL_HSB_CONFIG_REGS_MAX];

		for (int i = 0; i < 16; i++)
			dp.gid[i] = (uint8_t)(0xf0 + i);
		assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, xr, QL_HSB_CONFIG_REGS), -EINVAL);
		assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, xr, QL_HSB_CONFIG_REGS_MAX),
				 QL_HSB_CONFIG_REGS_MAX);
		for (int i = 0; i < QL_HSB_CONFIG_REGS_MAX; i++)
			assert_true(xr[i].addr < VP0 + 0x30 || xr[i].addr >= VP0 + 0x40);
		assert_int_equal(ql_hsb_configure(h, &t, &dp, NULL), 0);
		assert_reg(b.s, VP0 + QL_HSB_DP_HOST_IP, 0x7f000001);
		assert_reg(b.s, 0x7f000000, 0xf0f1f2f3);
		assert_reg(b.s, 0x7f00000c, 0xfcfdfeff);
		assert_reg(b.s, VP0 + QL_HSB_DP_VLAN, 0);
		assert_int_equal(ql_hl_server_dataplane(b.s, 0, &got), 0);
		assert_memory_equal(got.gid, dp.gid, 16);
	}
	/* VP 2 does not exist on this board: the board's answer */
	t.vp = 2;
	assert_int_equal(ql_hsb_configure(h, &t, &dp, NULL), -EFAULT);
	ql_hl_close(h);
	board_stop(&b);
}

/* A board that reads one register back wrong: the readback names it. */
static void test_configure_mismatch(void **state)
{
	struct ql_hl_server_config cfg = { .corrupt_addr = VP0 + QL_HSB_DP_RKEY,
					   .corrupt_xor = 0x100 };
	struct ql_hsb_target t = { .vp = 0 };
	struct ql_hsb_dataplane dp;
	struct board b;
	struct ql_hl *h;

	(void)state;
	sample_dp(&dp);
	board_start(&b, &cfg);
	h = open_board(ql_hl_server_port(b.s), 500, 2);
	assert_int_equal(ql_hsb_configure(h, &t, &dp, NULL), -EIO);
	assert_non_null(strstr(ql_error_detail(), "DP_RKEY (0x00001004) reads back 0x00002333, "
						  "wrote 0x00002233"));
	assert_int_equal(atomic_load(&b.configured), 0);
	assert_int_equal(ql_hl_server_dataplane(b.s, 0, &dp), -EAGAIN);
	ql_hl_close(h);
	board_stop(&b);
}

/* ------------------------------------------------ hostile requests to the board */

static size_t ask(struct ql_hl_server *s, const uint8_t *q, size_t len, uint8_t *r)
{
	return ql_hl_server_handle(s, q, len, r, QL_HL_DGRAM_MAX);
}

static void test_hostile_requests(void **state)
{
	struct ql_hl_server *s;
	uint8_t q[QL_HL_DGRAM_MAX + 16] = { 0 }, r[QL_HL_DGRAM_MAX];
	size_t n;

	(void)state;
	assert_int_equal(ql_hl_server_create(NULL, NULL, NULL, &s), 0);
	/* under a header: silence */
	assert_int_equal(ask(s, (const uint8_t *)"\x04\x01\x00\x01\x00", 5, r), 0);
	assert_int_equal(ask(s, q, 0, r), 0);
	/* unknown opcode: invalid command if an ack was asked, else nothing */
	memcpy(q, "\x42\x01\x00\x09\x00\x00", 6);
	assert_int_equal(ask(s, q, 6, r), 10);
	assert_memory_equal(r, "\xc2\x01\x00\x09\x04\x00\x00\x00\x00\x00", 10);
	q[1] = 0;
	assert_int_equal(ask(s, q, 6, r), 0);
	/* unknown flags */
	memcpy(q, "\x04\x81\x00\x02\x00\x00\x00\x00\x10\x00\x00\x00\x00\x05", 14);
	assert_int_equal(ask(s, q, 14, r), 10);
	assert_int_equal(r[4], QL_HL_ERR_FLAGS);
	memcpy(q, "\x14\x81\x00\x02\x00\x00\x00\x00\x10\x00", 10);
	assert_int_equal(ask(s, q, 10, r), 10);
	assert_int_equal(r[4], QL_HL_ERR_FLAGS);
	/* wrong lengths */
	memcpy(q, "\x04\x01\x00\x02\x00\x00\x00\x00\x10\x00\x00\x00\x00\x05", 14);
	assert_int_equal(ask(s, q, 13, r), 10);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	assert_int_equal(ask(s, q, 15, r), 10);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	q[0] = QL_HL_RD_DWORD;
	assert_int_equal(ask(s, q, 14, r), 10);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	q[0] = QL_HL_WR_BLOCK;
	assert_int_equal(ask(s, q, 6, r), 10);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	assert_int_equal(ask(s, q, 13, r), 10);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	/* a block too long: 129 pairs */
	memset(q + 6, 0, sizeof(q) - 6);
	for (int i = 0; i < 129; i++) {
		q[6 + 8 * i + 2] = 0x10;
		q[6 + 8 * i + 3] = 0x04;
	}
	assert_int_equal(ask(s, q, 6 + 8 * 129, r), 10);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	q[0] = QL_HL_RD_BLOCK;
	assert_int_equal(ask(s, q, 6 + 8 * 129, r), 10);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	/* ... and 128 is fine: the reply is the request plus the trailer */
	assert_int_equal(ask(s, q, 6 + 8 * 128, r), 6 + 8 * 128 + 4);
	assert_int_equal(r[4], 0);
	/* misaligned read: invalid address, in the read's own format */
	memcpy(q, "\x14\x01\x00\x03\x00\x00\x00\x00\x10\x02", 10);
	assert_int_equal(ask(s, q, 10, r), 18);
	assert_int_equal(r[4], QL_HL_ERR_ADDRESS);
	/* a write without an ack request is done silently */
	memcpy(q, "\x04\x00\x00\x04\x00\x00\x00\x00\x10\x04\x00\x00\x00\x09", 14);
	assert_int_equal(ask(s, q, 14, r), 0);
	assert_reg(s, VP0 + QL_HSB_DP_RKEY, 9);
	/* random datagrams: no crash, no reply longer than its request + 8 */
	srand(1);
	for (int i = 0; i < 200000; i++) {
		size_t len = (size_t)rand() % 64;

		for (size_t j = 0; j < len; j++)
			q[j] = (uint8_t)rand();
		if (i & 1)
			q[0] = (uint8_t[]){ 0x04, 0x09, 0x14, 0x19 }[rand() % 4];
		if (len > 8 && (i & 2)) {
			q[6] = q[7] = 0;
			q[8] = (uint8_t)(0x08 + (rand() & 0x18));
		}
		n = ask(s, q, len, r);
		assert_true(n <= len + 8);
	}
	ql_hl_server_destroy(s);
}

/* The emulated board's replies to requests built by hand from the facts
 * (docs/hololink.md "Replies"), byte for byte: opcode | 0x80, flags and
 * sequence echoed, status, reserved, the pairs echoed (writes too), four
 * trailer bytes; 18 bytes for a RD/WR_DWORD, 26 for a 2-pair block. */
static void test_golden_replies(void **state)
{
	static const uint8_t wr[14] = { 0x04, 0x03, 0x01, 0x00, 0x00, 0x00, 0x00,
					0x00, 0x10, 0x04, 0x12, 0x34, 0x56, 0x78 };
	static const uint8_t wr_reply[18] = { 0x84, 0x03, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
					      0x04, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t rd[10] = { 0x14, 0x03, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x10, 0x04 };
	static const uint8_t rd_reply[18] = { 0x94, 0x03, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x10,
					      0x04, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t wb[22] = { 0x09, 0x03, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00,
					0x10, 0x00, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00,
					0x10, 0x04, 0x00, 0x00, 0x22, 0x33 };
	static const uint8_t wb_reply[26] = { 0x89, 0x03, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x10,
					      0x00, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x10, 0x04,
					      0x00, 0x00, 0x22, 0x33, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t rb[22] = { 0x19, 0x03, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00,
					0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					0x10, 0x04, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t rb_reply[26] = { 0x99, 0x03, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x10,
					      0x00, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x10, 0x04,
					      0x00, 0x00, 0x22, 0x33, 0x00, 0x00, 0x00, 0x00 };
	/* an invalid address: status 0x03, the pair echoed with value 0 */
	static const uint8_t bad[10] = {
		0x14, 0x03, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x70, 0x00
	};
	static const uint8_t bad_reply[18] = {
		0x94, 0x03, 0x01, 0x04, 0x03, 0x00, 0x00, 0x00, 0x70,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00
	};
	struct ql_hl_server *s;
	uint8_t r[QL_HL_DGRAM_MAX];

	(void)state;
	assert_int_equal(ql_hl_server_create(NULL, NULL, NULL, &s), 0);
	assert_int_equal(ask(s, wr, sizeof(wr), r), sizeof(wr_reply));
	assert_memory_equal(r, wr_reply, sizeof(wr_reply));
	assert_int_equal(ask(s, rd, sizeof(rd), r), sizeof(rd_reply));
	assert_memory_equal(r, rd_reply, sizeof(rd_reply));
	assert_int_equal(ask(s, wb, sizeof(wb), r), sizeof(wb_reply));
	assert_memory_equal(r, wb_reply, sizeof(wb_reply));
	assert_int_equal(ask(s, rb, sizeof(rb), r), sizeof(rb_reply));
	assert_memory_equal(r, rb_reply, sizeof(rb_reply));
	assert_int_equal(ask(s, bad, sizeof(bad), r), sizeof(bad_reply));
	assert_memory_equal(r, bad_reply, sizeof(bad_reply));
	ql_hl_server_destroy(s);
}

/* A board answers only when ACK_REQUEST is set, reads included; writes
 * without it are still done. */
static void test_ack_request_rule(void **state)
{
	uint8_t rd[10] = { 0x14, 0x02, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80 };
	uint8_t rb[14] = { 0x19, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00,
			   0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00 };
	uint8_t wr[14] = { 0x04, 0x02, 0x00, 0x09, 0x00, 0x00, 0x00,
			   0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x2a };
	uint8_t unknown[6] = { 0x42, 0x00, 0x00, 0x0a, 0x00, 0x00 };
	struct ql_hl_server *s;
	uint8_t r[QL_HL_DGRAM_MAX];

	(void)state;
	assert_int_equal(ql_hl_server_create(NULL, NULL, NULL, &s), 0);
	assert_int_equal(ask(s, rd, sizeof(rd), r), 0);
	assert_int_equal(ask(s, rb, sizeof(rb), r), 0);
	assert_int_equal(ask(s, wr, sizeof(wr), r), 0);
	assert_int_equal(ask(s, unknown, sizeof(unknown), r), 0);
	assert_reg(s, VP0 + QL_HSB_DP_QP, 0x2a);
	rd[1] = 0x01;
	assert_int_equal(ask(s, rd, sizeof(rd), r), 18);
	ql_hl_server_destroy(s);
}

/* The registers upstream's Hololink::start() writes (and reads) are taken
 * and stored: VSYNC, PTP, control events, APB RAM, I2C; and a host written
 * to the protocol can start the board with the client. */
static void test_startup_registers(void **state)
{
	static const struct ql_hl_reg regs[] = {
		{ 0x70000000, 0 },
		{ 0x104, 2 },
		{ 0x108, 2 },
		{ 0x10c, 3 },
		{ 0x110, 0x33 },
		{ 0x100, 3 },
		{ 0x18c, 1 },
		{ 0x200, 0 },
		{ 0x204, 0 },
		{ 0x208, 0 },
		{ 0x20c, 0xffffffff },
		{ 0x20c, 0 },
		{ 0x210, 0x3937 },
		{ 0x214, 0 },
		{ 0x218, 0xffffffff },
		{ 0x21c, 0xffff },
		{ 0x220, 0xffffffff },
		{ 0x224, 50000 },
		{ 0x228, 8432 },
		{ 0x22c, 0 },
		{ 0x2080, 0x12345678 },
		{ 0x2000 + 0xffc, 7 },
		{ 0x03000200, 0x00ff0000 },
		{ 0x8, 0x3 },
	};
	struct board b;
	struct ql_hl *h;
	uint32_t v;

	(void)state;
	board_start(&b, NULL);
	h = open_board(ql_hl_server_port(b.s), 500, 1);
	assert_int_equal(ql_hl_read_dword(h, QL_HSB_REG_IP_VERSION, &v), 0);
	assert_int_equal(ql_hl_read_dword(h, QL_HSB_REG_FPGA_DATE, &v), 0);
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		assert_int_equal(ql_hl_write_dword(h, regs[i].addr, regs[i].value), 0);
	assert_int_equal(ql_hl_read_dword(h, 0x2080, &v), 0);
	assert_int_equal(v, 0x12345678);
	assert_int_equal(ql_hl_read_dword(h, 0x210, &v), 0);
	assert_int_equal(v, 0x3937);
	ql_hl_close(h);
	board_stop(&b);
}

/* Third parties cannot reprogram the board: with no allowlist the first
 * host that talks to it owns it; with one, only those hosts are answered.
 * Refused requests get no reply and change nothing. */
static void test_allowlist(void **state)
{
	static const uint8_t wr[14] = { 0x04, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00,
					0x00, 0x10, 0x04, 0x00, 0x00, 0x00, 0x07 };
	static const uint8_t evil[14] = { 0x04, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00,
					  0x00, 0x10, 0x04, 0x66, 0x66, 0x66, 0x66 };
	static const uint8_t rd[10] = { 0x14, 0x01, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x10, 0x04 };
	struct ql_hl_server_config cfg = { 0 };
	struct ql_hl_server_stats st;
	struct ql_hl_server *s;
	uint8_t r[QL_HL_DGRAM_MAX];
	uint32_t a, l;

	(void)state;
	assert_int_equal(ql_hl_server_create(NULL, NULL, NULL, &s), 0);
	assert_int_equal(ql_hl_server_handle_from(s, 0x0a000001, wr, 14, r, sizeof(r)), 18);
	assert_int_equal(ql_hl_server_handle_from(s, 0x0a000002, evil, 14, r, sizeof(r)), 0);
	assert_int_equal(ql_hl_server_handle_from(s, 0x0a000002, rd, 10, r, sizeof(r)), 0);
	assert_int_equal(ql_hl_server_handle(s, evil, 14, r, sizeof(r)), 0); /* loopback too */
	assert_reg(s, VP0 + QL_HSB_DP_RKEY, 7);
	ql_hl_server_stats(s, &st);
	assert_int_equal(st.refused, 3);
	assert_int_equal(st.owner, 0x0a000001);
	ql_hl_server_destroy(s);
	/* an explicit allowlist: 10.1.0.0/16 and 127.0.0.1 */
	assert_int_equal(ql_hl_allow_parse("10.1.0.0/16", &cfg.allow[0], &cfg.allow_len[0]), 0);
	assert_int_equal(ql_hl_allow_parse("127.0.0.1", &cfg.allow[1], &cfg.allow_len[1]), 0);
	assert_int_equal(cfg.allow_len[1], 32);
	assert_int_equal(ql_hl_allow_parse("10.1.0.0/33", &a, &l), -EINVAL);
	assert_int_equal(ql_hl_allow_parse("nohost", &a, &l), -EINVAL);
	cfg.n_allow = 2;
	assert_int_equal(ql_hl_server_create(&cfg, NULL, NULL, &s), 0);
	assert_int_equal(ql_hl_server_handle_from(s, 0x0a020001, evil, 14, r, sizeof(r)), 0);
	assert_int_equal(ql_hl_server_handle_from(s, 0x0a01ff09, wr, 14, r, sizeof(r)), 18);
	assert_int_equal(ql_hl_server_handle(s, rd, 10, r, sizeof(r)), 18);
	assert_reg(s, VP0 + QL_HSB_DP_RKEY, 7);
	ql_hl_server_destroy(s);
}

/* Enumeration: the packet, byte for byte at the offsets the facts give
 * (a BOOTP request; vendor tag 0xE0 at 236, "NVDA", data plane, version 2,
 * UUID at 246, serial at 266, IP version and CRC little-endian at 273/275),
 * parsed back; and the emulated board announcing itself to a listener. */
static void test_enumeration(void **state)
{
	struct ql_hl_enum e = { .ip = 0xc0a80002,
				.mac = { 0x48, 0xb0, 0x2d, 0x01, 0x02, 0x03 },
				.xid = 0x01020304,
				.secs = 7,
				.data_plane = 1,
				.uuid = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 },
				.serial = { 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70 },
				.ip_version = 0x2506,
				.fpga_crc = 0xbeef },
			  got;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct ql_hl_server_config cfg = { .announce_addr = "127.0.0.1", .announce_ms = 50 };
	struct ql_hl_server *s;
	uint8_t p[QL_HL_ENUM_LEN + 8];
	int fd;

	(void)state;
	assert_int_equal(ql_hl_enum_build(&e, p, 10), -EINVAL);
	assert_int_equal(ql_hl_enum_build(&e, p, sizeof(p)), 300);
	assert_memory_equal(p, "\x01\x01\x06\x00\x01\x02\x03\x04\x00\x07\x00\x00\xc0\xa8\x00\x02",
			    16);
	assert_memory_equal(p + 28, "\x48\xb0\x2d\x01\x02\x03\x00", 7);
	assert_memory_equal(p + 236, "\xe0\x27NVDA\x01\x02\x00\x00\x01\x02", 12);
	assert_int_equal(p[261], 16);
	assert_memory_equal(p + 262, "\x00\x00\x00\x00\x10\x20\x30\x40\x50\x60\x70\x06\x25\xef\xbe",
			    15);
	assert_int_equal(ql_hl_enum_parse(p, 300, &got), 0);
	assert_int_equal(got.ip, e.ip);
	assert_memory_equal(got.mac, e.mac, 6);
	assert_int_equal(got.data_plane, 1);
	assert_int_equal(got.enum_version, 2);
	assert_memory_equal(got.uuid, e.uuid, 16);
	assert_memory_equal(got.serial, e.serial, 7);
	assert_int_equal(got.ip_version, 0x2506);
	assert_int_equal(got.fpga_crc, 0xbeef);
	assert_int_equal(ql_hl_enum_parse(p, 270, &got), -EPROTO);
	p[238] = 'X';
	assert_int_equal(ql_hl_enum_parse(p, 300, &got), -EPROTO);
	/* the emulated board announces itself */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	cfg.announce_port = ntohs(a.sin_port);
	assert_int_equal(ql_hl_server_create(&cfg, NULL, NULL, &s), 0);
	ql_hl_server_poll(s, 0);
	{
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		assert_int_equal(poll(&pfd, 1, 2000), 1);
		n = recv(fd, p, sizeof(p), 0);
		assert_int_equal(n, 300);
		assert_int_equal(ql_hl_enum_parse(p, (size_t)n, &got), 0);
		assert_int_equal(got.ip, 0x7f000001);
		assert_int_equal(got.enum_version, 2);
		assert_int_equal(got.ip_version, 0x2504);
	}
	ql_hl_server_destroy(s);
	close(fd);
}

/* The 2.5 layout: DP_PAGE_LSB a page number (base >> 7), on both ends. */
static void test_layout_2_5(void **state)
{
	struct ql_hl_server_config cfg = { .layout = QL_HSB_LAYOUT_2_5 };
	struct ql_hsb_target t = { .layout = QL_HSB_LAYOUT_2_5 };
	struct ql_hsb_dataplane dp, got;
	struct board b;
	struct ql_hl *h;

	(void)state;
	sample_dp(&dp);
	board_start(&b, &cfg);
	h = open_board(ql_hl_server_port(b.s), 500, 1);
	assert_int_equal(ql_hsb_configure(h, &t, &dp, NULL), 0);
	assert_reg(b.s, VP0 + QL_HSB_DP_PAGE_LSB, (uint32_t)(dp.page_addr >> 7));
	assert_reg(b.s, VP0 + QL_HSB_DP_PAGE_MSB, 0x10);
	assert_int_equal(ql_hl_server_dataplane(b.s, 0, &got), 0);
	assert_dp_equal(&got, &dp);
	ql_hl_close(h);
	board_stop(&b);
	assert_int_equal(ql_hsb_layout_parse("2.5", &t.layout), 0);
	assert_int_equal(t.layout, QL_HSB_LAYOUT_2_5);
	assert_int_equal(ql_hsb_layout_parse("2.6.0", &t.layout), 0);
	assert_int_equal(t.layout, QL_HSB_LAYOUT_2_6);
	assert_int_equal(ql_hsb_layout_parse("2.4", &t.layout), -EINVAL);
}

/* ------------------------------------------------ docs/hololink.md's examples */

static size_t parse_hex(const char *line, uint8_t *out, size_t cap)
{
	size_t n = 0;
	unsigned int b;
	int used;

	while (n < cap && sscanf(line, " %2x%n", &b, &used) == 1) {
		out[n++] = (uint8_t)b;
		line += used;
	}
	return n;
}

/* The document's "Examples" list lines `    request: HEX` and `    reply:
 * HEX` (a reply of `none` means no answer); fed in order to a fresh board,
 * each request must get exactly the documented reply. */
static void test_doc_examples(void **state)
{
	FILE *f = fopen(QL_SOURCE_DIR "/docs/hololink.md", "r");
	struct ql_hl_server *s;
	char line[512];
	uint8_t q[256], want[256], r[QL_HL_DGRAM_MAX];
	size_t ql = 0, examples = 0;

	(void)state;
	assert_non_null(f);
	assert_int_equal(ql_hl_server_create(NULL, NULL, NULL, &s), 0);
	while (fgets(line, sizeof(line), f)) {
		char *p = line;

		while (*p == ' ')
			p++;
		if (!strncmp(p, "request:", 8)) {
			ql = parse_hex(p + 8, q, sizeof(q));
			assert_true(ql >= 6);
		} else if (!strncmp(p, "reply:", 6)) {
			size_t wl = strstr(p, "none") ? 0 : parse_hex(p + 6, want, sizeof(want));
			size_t n;

			assert_true(ql > 0);
			n = ask(s, q, ql, r);
			if (n != wl || memcmp(r, want, n))
				fail_msg("docs/hololink.md example %zu: reply differs",
					 examples + 1);
			examples++;
			ql = 0;
		}
	}
	fclose(f);
	ql_hl_server_destroy(s);
	assert_true(examples >= 6);
}

/* The fuzzer's seed corpus (tests/fuzz/corpus/hololink, fuzz_hololink.c's
 * format: length byte, datagram; 0xff: the rest) replayed with the
 * project's compiler, so that ASan and coverage builds run it too; the
 * configure seeds must enable VP 0. */
static void test_corpus_replay(void **state)
{
	DIR *d = opendir(QL_SOURCE_DIR "/tests/fuzz/corpus/hololink");
	struct dirent *e;
	int files = 0, enabled = 0;

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		struct ql_hl_server_config cfg = { .num_vps = 2 };
		struct ql_hsb_dataplane dp;
		struct ql_hl_server *s;
		uint8_t in[4096], r[QL_HL_DGRAM_MAX];
		char path[512];
		size_t size, off = 0;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/hololink/%s", QL_SOURCE_DIR,
			 e->d_name);
		f = fopen(path, "rb");
		assert_non_null(f);
		size = fread(in, 1, sizeof(in), f);
		fclose(f);
		assert_int_equal(ql_hl_server_create(&cfg, NULL, NULL, &s), 0);
		while (off < size) {
			size_t len = in[off] == 0xff || in[off] >= size - off ? size - off - 1 :
										in[off];
			size_t n = ask(s, in + off + 1, len, r);

			assert_true(n <= len + 8);
			if (n) {
				assert_int_equal(r[0], in[off + 1] | 0x80);
				assert_memory_equal(r + 1, in + off + 2, 3);
			}
			off += 1 + len;
		}
		if (!strncmp(e->d_name, "configure-vp0", 13) ||
		    !strncmp(e->d_name, "configure-then", 14)) {
			assert_int_equal(ql_hl_server_dataplane(s, 0, &dp), 0);
			enabled++;
		}
		ql_hl_server_destroy(s);
		files++;
	}
	closedir(d);
	assert_true(files >= 10);
	assert_int_equal(enabled, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dword_and_block),
		cmocka_unit_test(test_dropped_reply),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_board_refusals),
		cmocka_unit_test_setup_teardown(test_status_mapping, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_hostile_replies, fake_setup, fake_teardown),
		cmocka_unit_test(test_configure),
		cmocka_unit_test(test_configure_mismatch),
		cmocka_unit_test(test_hostile_requests),
		cmocka_unit_test(test_golden_replies),
		cmocka_unit_test(test_ack_request_rule),
		cmocka_unit_test(test_startup_registers),
		cmocka_unit_test(test_allowlist),
		cmocka_unit_test(test_enumeration),
		cmocka_unit_test(test_layout_2_5),
		cmocka_unit_test(test_loopback_any),
		cmocka_unit_test(test_doc_examples),
		cmocka_unit_test(test_corpus_replay),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
