/* SPDX-License-Identifier: MIT */
/*
 * ql-cudaq-udp-client: a caller of CUDA-Q Realtime's UDP transport that
 * behaves as CUDA-Q's own two-process test does (its transceiver and its
 * fixture), for running CUDA-Q's test cases against a server address:
 * `qlink serve --transport=udp` (tests/cli_cudaq_server.sh) or CUDA-Q's own
 * cudaq_realtime_test_server.
 *
 * What it copies from the CUDA-Q caller: one UDP socket connect()ed to the
 * server (replies from anywhere else are discarded by the kernel); every
 * request is one datagram of exactly one slot stride, built in a zeroed
 * slot of a TX ring (header, arguments, zeros); replies land in a strict
 * FIFO RX ring (reply k in the next RX slot; any length up to the stride
 * accepted); a reply is awaited 5 s, "no reply" is a quiet 500 ms.
 *
 *   ql-cudaq-udp-client [--slots N] [--slot-size S] HOST PORT CASE...
 *
 * HOST is an IPv4 or IPv6 literal. CUDA-Q's cases (its test names):
 *   increment         one rpc_increment of "hello dispatcher", request_id 1
 *                     (IncrementsStringPayload); the reply's first 40 bytes
 *                     are also checked against CUDA-Q's observed bytes
 *   wrap              3 x slots increments, one at a time
 *                     (IncrementsBurstAcrossRingWrap)
 *   bad_magic         a good request, then magic 0xdeadbeef: no reply
 *                     (DropsBadMagic; count 1)
 *   unknown_function  a good request, then function_id
 *                     FNV-1a("no_such_function"): no reply
 *                     (DropsUnknownFunctionId; count 1)
 *   count5            5 increments (ReportsProcessedCount; count 5)
 * and qlink's own:
 *   after_drop        bad magic, unknown function, then a good request: it
 *                     IS answered (no stall after a drop); count 2
 *   burst             1024 requests in batches of 64 sent back to back, each
 *                     with its own arguments and ptp_timestamp, all answered
 *                     in order
 *   garbage           good requests between datagrams that must be dropped
 *                     unanswered: short (10 bytes), longer than the stride
 *                     (holding a valid request), random bytes, empty, a
 *                     header whose arg_len overruns the slot; every good
 *                     one answered, nothing else
 *   short_request     a valid request in a 64-byte datagram: zero-filled
 *                     to the stride and answered
 *   bad_answered      against a server answering bad requests (qlink serve
 *                     --bad-requests answer): bad magic and an unknown
 *                     function get a response with a negative status,
 *                     not counted; a good request after them is answered
 *
 * Each case that passes prints "PASS CASE"; at the end
 * "expect_count=K": the PROCESSED count a server must report for the cases
 * run against it. Exit 0 when every case passed, 1 at the first failure
 * (with what was wrong), 2 for bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAGIC_REQUEST 0x43555152u
#define MAGIC_RESPONSE 0x43555153u
#define HEADER 24u
#define REPLY_TIMEOUT_MS 5000
#define NO_REPLY_WINDOW_MS 500

struct caller {
	int fd;
	uint32_t slots, stride;
	uint8_t *tx, *rx;	   /* slots x stride each */
	uint32_t txc, rxc;	   /* FIFO cursors */
	unsigned long long expect; /* requests the server must count */
	const char *test;	   /* the case running */
};

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 0x811c9dc5u;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 0x01000193u;
	return h;
}

static __attribute__((noreturn, format(printf, 2, 3))) void fail(const struct caller *c,
								 const char *fmt, ...)
{
	va_list ap;

	printf("FAIL %s: ", c->test);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	exit(1);
}

/* Build a request in the next (zeroed) TX slot and send the first `len`
 * bytes of it (the stride, as CUDA-Q always does, unless a case says). */
static void post_len(struct caller *c, uint32_t request_id, const void *args, uint32_t arg_len,
		     uint32_t magic, uint32_t function_id, uint64_t ptp, uint32_t len)
{
	uint8_t *tx = c->tx + (size_t)c->txc * c->stride;
	ssize_t n;

	memset(tx, 0, c->stride);
	put32(tx, magic);
	put32(tx + 4, function_id);
	put32(tx + 8, arg_len);
	put32(tx + 12, request_id);
	put64(tx + 16, ptp);
	if (arg_len)
		memcpy(tx + HEADER, args, arg_len);
	n = send(c->fd, tx, len, 0);
	if (n != (ssize_t)len)
		fail(c, "send of %u bytes: %s", len, n < 0 ? strerror(errno) : "short");
	c->txc = (c->txc + 1) % c->slots;
}

static void post(struct caller *c, uint32_t request_id, const char *args)
{
	post_len(c, request_id, args, (uint32_t)strlen(args), MAGIC_REQUEST, fnv1a("rpc_increment"),
		 0, c->stride);
}

/* A raw datagram (garbage): sent as is, no slot. */
static void send_raw(struct caller *c, const void *buf, size_t len)
{
	ssize_t n = send(c->fd, buf, len, 0);

	if (n != (ssize_t)len)
		fail(c, "send of a %zu-byte datagram: %s", len, n < 0 ? strerror(errno) : "short");
}

/* The next reply into the next RX slot within ms: its length, or -1. */
static ssize_t wait_reply(struct caller *c, int ms)
{
	uint8_t *rx = c->rx + (size_t)c->rxc * c->stride;
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	struct timespec t0, t;
	ssize_t n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		long left;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return -1;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			fail(c, "poll: %s", strerror(errno));
		/* MSG_TRUNC: the datagram's real length, to see one too long */
		n = recv(c->fd, rx, c->stride, MSG_DONTWAIT | MSG_TRUNC);
		if (n >= 0)
			return n;
		if (errno == ECONNREFUSED)
			fail(c, "the server's port is closed (ICMP port unreachable)");
		if (errno != EAGAIN && errno != EINTR)
			fail(c, "recv: %s", strerror(errno));
	}
}

/* The next reply must be `sent` with every byte incremented. */
static const uint8_t *expect_reply(struct caller *c, uint32_t request_id, const void *sent,
				   uint32_t len, uint64_t ptp)
{
	const uint8_t *rx = c->rx + (size_t)c->rxc * c->stride, *s = sent;
	ssize_t n = wait_reply(c, REPLY_TIMEOUT_MS);

	if (n < 0)
		fail(c, "no reply in %d ms to request %u", REPLY_TIMEOUT_MS, request_id);
	if ((size_t)n > c->stride)
		fail(c, "reply of %zd bytes, longer than the %u-byte stride", n, c->stride);
	if ((size_t)n < HEADER + len)
		fail(c, "reply of %zd bytes to request %u, want at least %u", n, request_id,
		     HEADER + len);
	if (get32(rx) != MAGIC_RESPONSE)
		fail(c, "reply magic 0x%08x", get32(rx));
	if (get32(rx + 4) != 0)
		fail(c, "reply status %d to request %u", (int32_t)get32(rx + 4), request_id);
	if (get32(rx + 8) != len)
		fail(c, "result_len %u, want %u", get32(rx + 8), len);
	if (get32(rx + 12) != request_id)
		fail(c, "reply to request %u where %u was next (FIFO)", get32(rx + 12), request_id);
	if (get64(rx + 16) != ptp)
		fail(c, "ptp_timestamp 0x%llx not echoed (0x%llx)",
		     (unsigned long long)get64(rx + 16), (unsigned long long)ptp);
	for (uint32_t i = 0; i < len; i++)
		if (rx[HEADER + i] != (uint8_t)(s[i] + 1))
			fail(c, "result byte %u of request %u: 0x%02x, want 0x%02x", i, request_id,
			     rx[HEADER + i], (uint8_t)(s[i] + 1));
	c->rxc = (c->rxc + 1) % c->slots;
	c->expect++;
	return rx;
}

static void expect_increment(struct caller *c, uint32_t request_id, const char *sent)
{
	expect_reply(c, request_id, sent, (uint32_t)strlen(sent), 0);
}

static void expect_no_reply(struct caller *c)
{
	ssize_t n = wait_reply(c, NO_REPLY_WINDOW_MS);

	if (n >= 0)
		fail(c, "a %zd-byte reply (request_id %u) where none was due", n,
		     n >= 16 ? get32(c->rx + (size_t)c->rxc * c->stride + 12) : 0);
}

/* ---- CUDA-Q's cases -------------------------------------------------------- */

static void case_increment(struct caller *c)
{
	/* the reply CUDA-Q's server gives (docs/cudaq.md) */
	static const uint8_t golden[40] = {
		0x53, 0x51, 0x55, 0x43, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x69, 0x66, 0x6d, 0x6d,
		0x70, 0x21, 0x65, 0x6a, 0x74, 0x71, 0x62, 0x75, 0x64, 0x69, 0x66, 0x73,
	};
	const uint8_t *rx;

	post(c, 1, "hello dispatcher");
	rx = expect_reply(c, 1, "hello dispatcher", 16, 0);
	if (memcmp(rx, golden, sizeof(golden)))
		fail(c, "the reply's first 40 bytes differ from CUDA-Q's");
}

static void case_wrap(struct caller *c)
{
	char p[32];

	for (uint32_t i = 0; i < 3 * c->slots; i++) {
		snprintf(p, sizeof(p), "burst-%u", i);
		post(c, i + 1, p);
		expect_increment(c, i + 1, p);
	}
}

static void case_bad_magic(struct caller *c)
{
	post(c, 1, "before bad magic");
	expect_increment(c, 1, "before bad magic");
	post_len(c, 2, "unframed", 8, 0xdeadbeefu, fnv1a("rpc_increment"), 0, c->stride);
	expect_no_reply(c);
}

static void case_unknown_function(struct caller *c)
{
	post(c, 1, "before unknown id");
	expect_increment(c, 1, "before unknown id");
	if (fnv1a("no_such_function") != 0xb18ae409u)
		fail(c, "FNV-1a(no_such_function) = 0x%08x", fnv1a("no_such_function"));
	post_len(c, 2, "unroutable", 10, MAGIC_REQUEST, fnv1a("no_such_function"), 0, c->stride);
	expect_no_reply(c);
}

static void case_count5(struct caller *c)
{
	char p[32];

	for (uint32_t i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "counted-%u", i);
		post(c, i + 1, p);
		expect_increment(c, i + 1, p);
	}
}

/* ---- qlink's ---------------------------------------------------------------- */

static void case_after_drop(struct caller *c)
{
	post_len(c, 1, "unframed", 8, 0xdeadbeefu, fnv1a("rpc_increment"), 0, c->stride);
	post_len(c, 2, "unroutable", 10, MAGIC_REQUEST, 0xb18ae409u, 0, c->stride);
	post(c, 3, "after two drops");
	expect_increment(c, 3, "after two drops");
	post(c, 4, "and the next");
	expect_increment(c, 4, "and the next");
	expect_no_reply(c);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void case_burst(struct caller *c)
{
	enum { BATCH = 64, ROUNDS = 16 };
	uint32_t len = c->stride - HEADER < 64 ? c->stride - HEADER : 64;
	uint8_t args[BATCH][64];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint32_t id = 1;

	for (int r = 0; r < ROUNDS; r++) {
		for (int k = 0; k < BATCH; k++) {
			for (uint32_t i = 0; i < len; i++)
				args[k][i] = (uint8_t)rnd(&seed);
			post_len(c, id + (uint32_t)k, args[k], len, MAGIC_REQUEST,
				 fnv1a("rpc_increment"), 0x1000000000ull + id + (uint32_t)k,
				 c->stride);
		}
		for (int k = 0; k < BATCH; k++)
			expect_reply(c, id + (uint32_t)k, args[k], len,
				     0x1000000000ull + id + (uint32_t)k);
		id += BATCH;
	}
	expect_no_reply(c);
}

static void case_garbage(struct caller *c)
{
	uint8_t *buf = calloc(1, (size_t)c->stride + 64);
	uint64_t seed = 42;
	uint32_t id = 1;
	char p[32];

	if (!buf)
		fail(c, "out of memory");
#define GOOD()                                         \
	do {                                           \
		snprintf(p, sizeof(p), "good-%u", id); \
		post(c, id, p);                        \
		expect_increment(c, id, p);            \
		id++;                                  \
	} while (0)
	GOOD();
	/* short: 10 bytes, not a header */
	for (int i = 0; i < 10; i++)
		buf[i] = (uint8_t)(0xa0 + i);
	send_raw(c, buf, 10);
	GOOD();
	/* longer than the stride, though it holds a valid request: dropped */
	memset(buf, 0, (size_t)c->stride + 64);
	put32(buf, MAGIC_REQUEST);
	put32(buf + 4, fnv1a("rpc_increment"));
	put32(buf + 8, 4);
	put32(buf + 12, 999);
	memcpy(buf + HEADER, "long", 4);
	send_raw(c, buf, (size_t)c->stride + 64);
	GOOD();
	/* random bytes, one stride (never the request magic) */
	for (uint32_t i = 0; i < c->stride; i++)
		buf[i] = (uint8_t)rnd(&seed);
	if (get32(buf) == MAGIC_REQUEST)
		buf[0] ^= 1;
	send_raw(c, buf, c->stride);
	GOOD();
	/* empty */
	send_raw(c, buf, 0);
	GOOD();
	/* a header whose arguments would overrun the slot */
	memset(buf, 0, c->stride);
	put32(buf, MAGIC_REQUEST);
	put32(buf + 4, fnv1a("rpc_increment"));
	put32(buf + 8, c->stride);
	put32(buf + 12, 998);
	send_raw(c, buf, c->stride);
	GOOD();
	expect_no_reply(c);
#undef GOOD
	free(buf);
}

static void case_short_request(struct caller *c)
{
	if (c->stride < 64)
		fail(c, "needs a stride of at least 64");
	post_len(c, 1, "sixteen bytes!!!", 16, MAGIC_REQUEST, fnv1a("rpc_increment"), 7, 64);
	expect_reply(c, 1, "sixteen bytes!!!", 16, 7);
}

/* The next reply must be a refusal: response magic, negative status. */
static void expect_refusal(struct caller *c)
{
	const uint8_t *rx = c->rx + (size_t)c->rxc * c->stride;
	ssize_t n = wait_reply(c, REPLY_TIMEOUT_MS);

	if (n < 0)
		fail(c, "no error response in %d ms", REPLY_TIMEOUT_MS);
	if (n < (ssize_t)HEADER || (size_t)n > c->stride)
		fail(c, "error response of %zd bytes", n);
	if (get32(rx) != MAGIC_RESPONSE || (int32_t)get32(rx + 4) >= 0)
		fail(c, "want an error response: magic 0x%08x status %d", get32(rx),
		     (int32_t)get32(rx + 4));
	c->rxc = (c->rxc + 1) % c->slots;
}

static void case_bad_answered(struct caller *c)
{
	post_len(c, 1, "unframed", 8, 0xdeadbeefu, fnv1a("rpc_increment"), 0, c->stride);
	expect_refusal(c);
	post_len(c, 2, "unroutable", 10, MAGIC_REQUEST, 0xb18ae409u, 0, c->stride);
	expect_refusal(c);
	post(c, 3, "after two refusals");
	expect_increment(c, 3, "after two refusals");
}

static const struct {
	const char *name;
	void (*run)(struct caller *c);
} cases[] = {
	{ "increment", case_increment },
	{ "wrap", case_wrap },
	{ "bad_magic", case_bad_magic },
	{ "unknown_function", case_unknown_function },
	{ "count5", case_count5 },
	{ "after_drop", case_after_drop },
	{ "burst", case_burst },
	{ "garbage", case_garbage },
	{ "short_request", case_short_request },
	{ "bad_answered", case_bad_answered },
};

static int usage(void)
{
	fprintf(stderr, "usage: ql-cudaq-udp-client [--slots N] [--slot-size S] HOST PORT CASE...\n"
			"cases:");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		fprintf(stderr, " %s", cases[i].name);
	fputc('\n', stderr);
	return 2;
}

int main(int argc, char **argv)
{
	struct caller c = { .slots = 4, .stride = 256 };
	struct addrinfo hints = { .ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICHOST };
	struct addrinfo *ai;
	int i = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (; i + 1 < argc && !strncmp(argv[i], "--", 2); i += 2) {
		unsigned long v = strtoul(argv[i + 1], NULL, 10);

		if (!strcmp(argv[i], "--slots") && v >= 1 && v <= 4096)
			c.slots = (uint32_t)v;
		else if (!strcmp(argv[i], "--slot-size") && v >= 64 && v <= 65507)
			c.stride = (uint32_t)v;
		else
			return usage();
	}
	if (argc - i < 3)
		return usage();
	for (int k = i + 2; k < argc; k++) {
		size_t j = 0;

		while (j < sizeof(cases) / sizeof(cases[0]) && strcmp(cases[j].name, argv[k]))
			j++;
		if (j == sizeof(cases) / sizeof(cases[0]))
			return usage();
	}
	if (getaddrinfo(argv[i], argv[i + 1], &hints, &ai)) {
		fprintf(stderr, "ql-cudaq-udp-client: bad address %s port %s\n", argv[i],
			argv[i + 1]);
		return 2;
	}
	c.test = "setup";
	c.fd = socket(ai->ai_family, SOCK_DGRAM, 0);
	if (c.fd < 0 || connect(c.fd, ai->ai_addr, ai->ai_addrlen))
		fail(&c, "socket/connect: %s", strerror(errno));
	freeaddrinfo(ai);
	c.tx = calloc(c.slots, c.stride);
	c.rx = calloc(c.slots, c.stride);
	if (!c.tx || !c.rx)
		fail(&c, "out of memory");
	for (int k = i + 2; k < argc; k++) {
		for (size_t j = 0; j < sizeof(cases) / sizeof(cases[0]); j++) {
			if (strcmp(cases[j].name, argv[k]))
				continue;
			c.test = cases[j].name;
			cases[j].run(&c);
			printf("PASS %s\n", c.test);
		}
	}
	printf("expect_count=%llu\n", c.expect);
	close(c.fd);
	free(c.tx);
	free(c.rx);
	return 0;
}
