/* SPDX-License-Identifier: MIT */
/*
 * The Hololink register protocol (qlink/hololink.h): the client against the
 * emulated board over 127.0.0.1 (dword and block reads and writes, a
 * dropped reply recovered by a retransmission, silence reported with the
 * register address, every device status mapped to its errno), the
 * data-plane configuration with its readback (a board that corrupts one
 * register is caught, by name), a scripted hostile board (runts, foreign
 * opcodes, stale sequence numbers, wrong lengths and address echoes), hostile
 * requests to the emulated board (malformed, out of range, read-only,
 * enabled VP, random bytes), and docs/hololink.md's hex examples byte for
 * byte.
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
	/* out of range values: general error */
	assert_int_equal(ql_hl_write_dword(h, VP0 + QL_HSB_DP_MAX_BUFF, 4096), -EIO);
	assert_non_null(strstr(ql_error_detail(), "general error"));
	assert_int_equal(ql_hl_write_dword(h, VP0 + QL_HSB_DP_PAGE_MSB, 0x80), -EIO);
	assert_int_equal(ql_hl_write_dword(h, VP0 + QL_HSB_DP_QP, 0x1000000), -EIO);
	assert_int_equal(ql_hl_write_dword(h, HIF + QL_HSB_DP_VP_MASK, 2), -EIO);
	/* enabling an unconfigured VP */
	assert_int_equal(ql_hl_write_dword(h, HIF + QL_HSB_DP_VP_MASK, 1), -EIO);
	/* a block with one bad register changes nothing */
	assert_int_equal(ql_hl_write_block(h, blk, 2), -EFAULT);
	assert_int_equal(ql_hl_read_dword(h, VP0 + QL_HSB_DP_QP, &v), 0);
	assert_int_equal(v, 0);
	ql_hl_close(h);
	board_stop(&b);
}

/* ------------------------------------------------------- a scripted board */

enum mode {
	M_STATUS,    /* answer every request with status `code` */
	M_NOISE,     /* runt, other opcode, stale sequence, then the answer */
	M_SHORT,     /* right sequence, too short for a read */
	M_LONG_ACK,  /* a 6-byte write ack */
	M_BAD_ECHO,  /* a read reply for another address */
	M_OTHER_SRC, /* the answer, from another socket */
};

static struct {
	int fd, other;
	uint16_t port;
	pthread_t t;
	atomic_int mode, code, stop;
	uint8_t last[QL_HL_DGRAM_MAX];
	size_t last_len;
} fake;

static void *fake_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&fake.stop)) {
		struct pollfd pfd = { .fd = fake.fd, .events = POLLIN };
		uint8_t q[QL_HL_DGRAM_MAX], r[QL_HL_DGRAM_MAX];
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n;
		size_t rl;
		uint32_t addr;

		if (poll(&pfd, 1, 20) <= 0)
			continue;
		n = recvfrom(fake.fd, q, sizeof(q), 0, (struct sockaddr *)&from, &flen);
		if (n < 10)
			continue;
		memcpy(fake.last, q, (size_t)n);
		fake.last_len = (size_t)n;
		memcpy(r, q, 4);
		r[4] = 0;
		rl = 5;
		if (q[0] == QL_HL_RD_DWORD) {
			memcpy(r + 6, q + 6, 4);
			r[5] = 0;
			memset(r + 10, 0xab, 4);
			memcpy(r + 14, q + 2, 2);
			rl = 16;
		}
		switch (atomic_load(&fake.mode)) {
		case M_STATUS:
			r[4] = (uint8_t)atomic_load(&fake.code);
			break;
		case M_NOISE: {
			uint8_t x[16];

			sendto(fake.fd, r, 3, 0, (struct sockaddr *)&from, flen); /* runt */
			memcpy(x, r, rl);
			x[0] ^= 0x10; /* another opcode */
			sendto(fake.fd, x, rl, 0, (struct sockaddr *)&from, flen);
			memcpy(x, r, rl);
			x[3] ^= 0x55; /* a stale sequence number */
			x[4] = QL_HL_ERR_GENERAL;
			sendto(fake.fd, x, rl, 0, (struct sockaddr *)&from, flen);
			break;
		}
		case M_SHORT:
			rl = q[0] == QL_HL_RD_DWORD ? 12 : rl;
			break;
		case M_LONG_ACK:
			rl = q[0] == QL_HL_WR_DWORD ? 6 : rl;
			break;
		case M_BAD_ECHO:
			addr = q[0] == QL_HL_RD_DWORD ? 1u : 0u;
			r[9] ^= (uint8_t)(addr << 2);
			break;
		case M_OTHER_SRC:
			sendto(fake.other, r, rl, 0, (struct sockaddr *)&from, flen);
			continue;
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
	static const uint8_t body[8] = { 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x02 };
	struct ql_hl *h = open_board(fake.port, 500, 1);
	char want[32];
	uint32_t v;

	(void)state;
	atomic_store(&fake.mode, M_STATUS);
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		atomic_store(&fake.code, map[i].code);
		assert_int_equal(ql_hl_write_dword(h, 0x1000, 2), map[i].err);
		snprintf(want, sizeof(want), "status 0x%02x (%s)", map[i].code, map[i].name);
		assert_non_null(strstr(ql_error_detail(), want));
		assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), map[i].err);
		assert_int_equal(ql_hl_status_errno(map[i].code), map[i].err);
	}
	atomic_store(&fake.code, 0);
	assert_int_equal(ql_hl_write_dword(h, 0x1000, 2), 0);
	/* WR_DWORD: opcode, ack flag, sequence, reserved, address, value */
	assert_int_equal(fake.last_len, 14);
	assert_int_equal(fake.last[0], 0x04);
	assert_int_equal(fake.last[1], 0x01);
	assert_int_equal(fake.last[4] | fake.last[5], 0);
	assert_memory_equal(fake.last + 6, body, 8);
	assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), 0);
	assert_int_equal(v, 0xabababab);
	assert_int_equal(fake.last_len, 10);
	assert_int_equal(fake.last[0], 0x14);
	assert_memory_equal(fake.last + 6, body, 4);
	ql_hl_close(h);
}

/* Hostile replies: noise is ignored and counted, a reply with our sequence
 * number but a wrong shape or address echo is -EPROTO, and an answer from
 * another source never reaches the client. */
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
	assert_int_equal(st.stale, 6);
	atomic_store(&fake.mode, M_SHORT);
	assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), -EPROTO);
	assert_non_null(strstr(ql_error_detail(), "malformed 12-byte reply"));
	atomic_store(&fake.mode, M_LONG_ACK);
	assert_int_equal(ql_hl_write_dword(h, 0x1000, 1), -EPROTO);
	atomic_store(&fake.mode, M_BAD_ECHO);
	assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), -EPROTO);
	assert_non_null(strstr(ql_error_detail(), "another address"));
	ql_hl_close(h);
	h = open_board(fake.port, 60, 1);
	atomic_store(&fake.mode, M_OTHER_SRC);
	assert_int_equal(ql_hl_read_dword(h, 0x1000, &v), -ETIMEDOUT);
	ql_hl_close(h);
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
	dp->frame_len = 320;
	memcpy(dp->gid, gid, 16);
	memcpy(dp->mac, "\x02\x11\x22\x33\x44\x55", 6);
	dp->udp_port = 4791;
	dp->mtu = 4096;
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

	(void)state;
	sample_dp(&dp);
	board_start(&b, &cfg);
	h = open_board(ql_hl_server_port(b.s), 500, 2);
	assert_int_equal(ql_hl_server_dataplane(b.s, 1, &got), -EAGAIN);
	assert_int_equal(ql_hsb_configure(h, &t, &dp), 0);
	assert_int_equal(atomic_load(&b.configured), 1);
	assert_int_equal(b.vp, 1);
	assert_dp_equal(&b.dp, &dp);
	assert_int_equal(b.dp.mtu, 31 * 128 + 74);
	assert_int_equal(ql_hl_server_dataplane(b.s, 1, &got), 0);
	assert_dp_equal(&got, &dp);
	assert_int_equal(ql_hl_server_dataplane(b.s, 0, &got), -EAGAIN);
	/* register values as the map says */
	assert_reg(b.s, 0x1040 + QL_HSB_DP_PAGE_LSB, (uint32_t)(dp.page_addr >> 7));
	assert_reg(b.s, 0x1040 + QL_HSB_DP_PAGE_MSB, 0x10);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_PAGE_INC, 3);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_MAX_BUFF, 63);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_HOST_IP, 0x0a000001);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_HOST_MAC_LOW, 0x22334455);
	assert_reg(b.s, 0x1040 + QL_HSB_DP_HOST_MAC_HIGH, 0x0211);
	assert_reg(b.s, HIF + QL_HSB_DP_PACKET_SIZE, 31);
	assert_reg(b.s, HIF + QL_HSB_DP_VP_MASK, 2);
	/* an enabled VP's registers cannot change under it */
	assert_int_equal(ql_hl_write_dword(h, 0x1040 + QL_HSB_DP_RKEY, 1), -EIO);
	/* reconfiguring (clear, write, set) works and reports again */
	dp.rkey = 0x4455;
	assert_int_equal(ql_hsb_configure(h, &t, &dp), 0);
	assert_int_equal(atomic_load(&b.configured), 2);
	assert_int_equal(b.dp.rkey, 0x4455);
	/* parameters a board cannot take are refused before any traffic */
	dp.page_addr = 1ull << 39;
	assert_int_equal(ql_hsb_configure(h, &t, &dp), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "2^39"));
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
	assert_int_equal(
		ql_hsb_configure_board("127.0.0.1", ql_hl_server_port(b.s), &t, &dp, 500, 2), 0);
	assert_int_equal(ql_hl_server_dataplane(b.s, 0, &got), 0);
	assert_dp_equal(&got, &dp);
	/* a GID that is not IPv4-mapped (soft): DP_HOST_IP 127.0.0.1 and the
	 * whole GID in the emulated board's DP_HOST_GID extension */
	{
		struct ql_hl_reg xr[QL_HSB_CONFIG_REGS_MAX];

		for (int i = 0; i < 16; i++)
			dp.gid[i] = (uint8_t)(0xf0 + i);
		assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, xr, QL_HSB_CONFIG_REGS), -EINVAL);
		assert_int_equal(ql_hsb_dataplane_regs(&t, &dp, xr, QL_HSB_CONFIG_REGS_MAX),
				 QL_HSB_CONFIG_REGS_MAX);
		assert_int_equal(ql_hsb_configure(h, &t, &dp), 0);
		assert_reg(b.s, VP0 + QL_HSB_DP_HOST_IP, 0x7f000001);
		assert_reg(b.s, VP0 + QL_HSB_DP_HOST_GID, 0xf0f1f2f3);
		assert_reg(b.s, VP0 + QL_HSB_DP_HOST_GID + 12, 0xfcfdfeff);
		assert_int_equal(ql_hl_server_dataplane(b.s, 0, &got), 0);
		assert_memory_equal(got.gid, dp.gid, 16);
	}
	/* VP 2 does not exist on this board: the board's answer */
	t.vp = 2;
	assert_int_equal(ql_hsb_configure(h, &t, &dp), -EFAULT);
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
	assert_int_equal(ql_hsb_configure(h, &t, &dp), -EIO);
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
	assert_int_equal(ask(s, q, 6, r), 5);
	assert_memory_equal(r, "\x42\x01\x00\x09\x04", 5);
	q[1] = 0;
	assert_int_equal(ask(s, q, 6, r), 0);
	/* unknown flags */
	memcpy(q, "\x04\x81\x00\x02\x00\x00\x00\x00\x10\x00\x00\x00\x00\x05", 14);
	assert_int_equal(ask(s, q, 14, r), 5);
	assert_int_equal(r[4], QL_HL_ERR_FLAGS);
	memcpy(q, "\x14\x80\x00\x02\x00\x00\x00\x00\x10\x00", 10);
	assert_int_equal(ask(s, q, 10, r), 5);
	assert_int_equal(r[4], QL_HL_ERR_FLAGS);
	/* wrong lengths */
	memcpy(q, "\x04\x01\x00\x02\x00\x00\x00\x00\x10\x00\x00\x00\x00\x05", 14);
	assert_int_equal(ask(s, q, 13, r), 5);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	assert_int_equal(ask(s, q, 15, r), 5);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	q[0] = QL_HL_RD_DWORD;
	assert_int_equal(ask(s, q, 14, r), 5);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	q[0] = QL_HL_WR_BLOCK;
	assert_int_equal(ask(s, q, 6, r), 5);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	assert_int_equal(ask(s, q, 13, r), 5);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	/* a block too long: 129 pairs */
	memset(q + 6, 0, sizeof(q) - 6);
	for (int i = 0; i < 129; i++) {
		q[6 + 8 * i + 2] = 0x10;
		q[6 + 8 * i + 3] = 0x04;
	}
	assert_int_equal(ask(s, q, 6 + 8 * 129, r), 5);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	q[0] = QL_HL_RD_BLOCK;
	assert_int_equal(ask(s, q, 6 + 8 * 129, r), 5);
	assert_int_equal(r[4], QL_HL_ERR_LENGTH);
	/* ... and 128 is fine: the reply is the request plus the latched sequence */
	assert_int_equal(ask(s, q, 6 + 8 * 128, r), 6 + 8 * 128 + 2);
	assert_int_equal(r[4], 0);
	/* misaligned read: invalid address, in the read's own format */
	memcpy(q, "\x14\x01\x00\x03\x00\x00\x00\x00\x10\x02", 10);
	assert_int_equal(ask(s, q, 10, r), 16);
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

			assert_true(n <= len + 6);
			if (n)
				assert_memory_equal(r, in + off + 1, 4);
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
		cmocka_unit_test(test_doc_examples),
		cmocka_unit_test(test_corpus_replay),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
