/* SPDX-License-Identifier: MIT */
/*
 * qlink sdr: one SDR-RDMA transfer between two processes or hosts
 * (docs/sdr.md, "qlink sdr").
 *
 *   qlink sdr recv --device URI --listen [ADDR:]PORT
 *   qlink sdr send --device URI --connect HOST:PORT --size 64M --count N
 *                  --reliability none|sr|ec|rc [--loss P --seed S --delay-us D]
 *   qlink sdr --pair --device URI [--peer-device URI] ...   (forks the receiver)
 *
 * The two ends meet over a TCP connection (or a socketpair with --pair): the
 * sender states the session (reliability, sizes, code), both exchange their
 * QPs' connection parameters as text lines (ql_conn_params_format), then per
 * message the receiver says it is ready, the sender sends and times it to
 * its own completion, the receiver checks every byte and says so. The
 * sender prints completion times, goodput and the counters of both sides.
 * RC mode is the baseline: the same message as one RDMA WRITE WITH
 * IMMEDIATE on an RC QP of the same provider.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qlink/error.h"
#include "qlink/sdr.h"
#include "qlink/sdr_ec.h"
#include "qlink/verbs.h"
#include "tools.h"

#define CMD "qlink sdr"

enum sdr_tool_rel { REL_NONE, REL_SR, REL_EC, REL_RC };

struct sdr_tool_opts {
	const char *mode; /* "send", "recv" or "pair" */
	const char *device, *peer_device, *listen, *connect, *fault;
	uint64_t size;
	uint32_t count;
	enum sdr_tool_rel rel;
	uint32_t ec_k, ec_m, chunk;
	uint32_t window; /* SDR: receive WQEs = packets in flight (0: the library's) */
	double loss, timeout_s;
	uint64_t seed;
	uint32_t delay_us;
};

static double sdr_tool_now(void);

enum {
	O_DEVICE = 256,
	O_PEER_DEVICE,
	O_LISTEN,
	O_CONNECT,
	O_PAIR,
	O_SIZE,
	O_COUNT,
	O_REL,
	O_EC,
	O_CHUNK,
	O_LOSS,
	O_FAULT,
	O_SEED,
	O_DELAY,
	O_TIMEOUT,
	O_WINDOW,
};

static const struct tool_opt sdr_opts[] = {
	{ "device", 'd', O_DEVICE, TOOL_VALUE, "URI",
	  "this side's device (soft+shm://NAME, soft+udp://IP, ibv://DEV)" },
	{ "peer-device", 0, O_PEER_DEVICE, TOOL_VALUE, "URI",
	  "--pair: the receiver's device (default: --device; two\n"
	  "soft+udp ends need two addresses: soft+udp://127.0.0.2)" },
	{ "listen", 0, O_LISTEN, TOOL_VALUE, "[ADDR:]PORT",
	  "recv: wait for the sender on this TCP port (0: any, printed)" },
	{ "connect", 0, O_CONNECT, TOOL_VALUE, "HOST:PORT", "send: the receiver's TCP port" },
	{ "pair", 0, O_PAIR, TOOL_FLAG, NULL, "fork the receiver, talk over a socketpair" },
	{ "size", 0, O_SIZE, TOOL_VALUE, "BYTES",
	  "message size, suffix K, M or G (default 1M; 1 .. 1G)" },
	{ "count", 0, O_COUNT, TOOL_VALUE, "N", "messages (default 10)" },
	{ "reliability", 0, O_REL, TOOL_VALUE, "R",
	  "none, sr (selective repeat, default), ec (erasure\n"
	  "coding, falls back to selective repeat) or rc" },
	{ "ec", 0, O_EC, TOOL_VALUE, "K,M",
	  "ec: K data + M parity chunks per stripe (default 8,2)" },
	{ "chunk", 0, O_CHUNK, TOOL_VALUE, "PACKETS",
	  "packets per chunk of the receiver's bitmap (default 64)" },
	{ "window", 0, O_WINDOW, TOOL_VALUE, "PACKETS",
	  "SDR: receive WQEs, so packets in flight (default 256)" },
	{ "loss", 0, O_LOSS, TOOL_VALUE, "P",
	  "soft+udp: drop each data packet the sender sends with\n"
	  "probability P (0 .. 0.5; seeded fault injection)" },
	{ "fault", 0, O_FAULT, TOOL_VALUE, "SPEC",
	  "soft+udp: any fault spec for the sender's data QP\n"
	  "(\"reorder=0.05&dup=0.01\"; see docs/soft-udp.md)" },
	{ "seed", 0, O_SEED, TOOL_VALUE, "S", "the fault injection's seed (default 1)" },
	{ "delay-us", 0, O_DELAY, TOOL_VALUE, "D",
	  "soft+udp: hold every packet of both ends D us (the\n"
	  "injected RTT is 2 D plus the wire's own)" },
	{ "timeout", 0, O_TIMEOUT, TOOL_VALUE, "TIME",
	  "give up on a message or the peer after this (default 30)" },
	/* MISSING listen */
	{ 0 },
};

static const struct tool_cmd sdr_cmd = {
	.name = "sdr",
	.usage = "recv --device URI --listen [ADDR:]PORT [options]\n"
		 "send --device URI --connect HOST:PORT [options]\n"
		 "--pair --device URI [--peer-device URI] [options]",
	.about = "One SDR-RDMA transfer (a message sent as one RDMA WRITE WITH IMMEDIATE per\n"
		 "packet over UC, reliability chosen in software), or the same message as one\n"
		 "RDMA WRITE on an RC QP, between two processes or hosts; every byte checked.\n",
	.opts = sdr_opts,
};

/* ---- options ---------------------------------------------------------- */

static int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		mul = 1ull << 10;
	else if (*end == 'M' || *end == 'm')
		mul = 1ull << 20;
	else if (*end == 'G' || *end == 'g')
		mul = 1ull << 30;
	if (mul != 1)
		end++;
	if (*end || v > max / mul || v * mul < min || v * mul > max)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

static int parse_rel(const char *s, enum sdr_tool_rel *r)
{
	static const char *const names[] = { "none", "sr", "ec", "rc" };
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i])) {
			*r = (enum sdr_tool_rel)i;
			return 0;
		}
	return -EINVAL;
}

static const char *sdr_tool_rel_name(enum sdr_tool_rel r)
{
	static const char *const names[] = { "none", "sr", "ec", "rc" };
	return (unsigned)r < 4 ? names[r] : "?";
}

static bool is_udp(const char *uri)
{
	return uri && !strncmp(uri, "soft+udp://", 11);
}

/* The device URI with the delay option added (soft+udp): every packet the
 * device sends is held delay_us (fault_slots sized for a window of 4 MiB
 * in flight at 4 KiB packets). */
static int uri_with_delay(const char *uri, uint32_t delay_us, char *out, size_t len)
{
	int n;

	if (!delay_us)
		n = snprintf(out, len, "%s", uri);
	else
		n = snprintf(out, len, "%s%cdelay=1&delay_us=%" PRIu32 "&fault_slots=2048", uri,
			     strchr(uri, '?') ? '&' : '?', delay_us);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The fault spec of the sender's data QP: loss (and the delay it replaces
 * the device's with), or the user's spec. "" when none. */
static int sdr_tool_fault_spec(const struct sdr_tool_opts *o, char *out, size_t len)
{
	int n = 0;

	if (o->fault)
		n = snprintf(out, len, "%s&seed=%" PRIu64, o->fault, o->seed);
	else if (o->loss > 0 && o->delay_us)
		n = snprintf(out, len,
			     "drop=%.6f&delay=%.6f&delay_us=%" PRIu32
			     "&fault_slots=2048&seed=%" PRIu64,
			     o->loss, 1.0 - o->loss, o->delay_us, o->seed);
	else if (o->loss > 0)
		n = snprintf(out, len, "drop=%.6f&seed=%" PRIu64, o->loss, o->seed);
	else
		out[0] = '\0';
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- the out-of-band connection ----------------------------------------- */

static int split_hostport(const char *s, char *host, size_t hlen, char *port, size_t plen,
			  const char *def_host)
{
	const char *colon = strrchr(s, ':');
	size_t h;

	if (!colon) {
		snprintf(host, hlen, "%s", def_host);
		snprintf(port, plen, "%s", s);
		return *s ? 0 : -EINVAL;
	}
	h = (size_t)(colon - s);
	if (h >= hlen || !colon[1] || strlen(colon + 1) >= plen)
		return -EINVAL;
	if (h == 0)
		snprintf(host, hlen, "%s", def_host);
	else
		snprintf(host, hlen, "%.*s", (int)h, s);
	snprintf(port, plen, "%s", colon + 1);
	return 0;
}

static void set_timeouts(int fd, double timeout_s)
{
	struct timeval tv = { .tv_sec = (time_t)timeout_s,
			      .tv_usec = (suseconds_t)((timeout_s - floor(timeout_s)) * 1e6) };
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int oob_listen(const char *spec, double timeout_s)
{
	char host[256], port[32];
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV },
			*ai = NULL;
	int fd = -1, c = -1, one = 1, rc;
	struct pollfd pfd;

	if (split_hostport(spec, host, sizeof(host), port, sizeof(port), "0.0.0.0")) {
		fprintf(stderr, CMD ": bad --listen '%s' (want [ADDR:]PORT)\n", spec);
		return -1;
	}
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, CMD ": --listen %s: %s\n", spec, gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1)) {
		fprintf(stderr, CMD ": --listen %s: %s\n", spec, strerror(errno));
		goto out;
	}
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char h[64] = "?";
		if (!getsockname(fd, (struct sockaddr *)&ss, &sl)) {
			uint16_t p = ss.ss_family == AF_INET6 ?
					     ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) :
					     ntohs(((struct sockaddr_in *)&ss)->sin_port);
			snprintf(h, sizeof(h), "%u", p);
		}
		printf("listening on port %s\n", h);
		fflush(stdout);
	}
	pfd.fd = fd;
	pfd.events = POLLIN;
	rc = poll(&pfd, 1, (int)(timeout_s * 1000));
	if (rc <= 0) {
		fprintf(stderr, CMD ": no sender connected within %.0f s\n", timeout_s);
		goto out;
	}
	c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		fprintf(stderr, CMD ": accept: %s\n", strerror(errno));
out:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	if (c >= 0)
		set_timeouts(c, timeout_s);
	return c;
}

static int oob_connect(const char *spec, double timeout_s)
{
	char host[256], port[32];
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV },
			*ai = NULL;
	double t0 = sdr_tool_now();
	int fd = -1, rc;

	if (split_hostport(spec, host, sizeof(host), port, sizeof(port), "127.0.0.1")) {
		fprintf(stderr, CMD ": bad --connect '%s' (want HOST:PORT)\n", spec);
		return -1;
	}
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, CMD ": --connect %s: %s\n", spec, gai_strerror(rc));
		return -1;
	}
	/* the receiver may not listen yet (refused): retry until the
	 * timeout, saying so once; an unreachable host fails at once */
	for (bool said = false;; said = true) {
		int err;

		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && !connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		err = errno;
		if (fd >= 0)
			close(fd);
		fd = -1;
		if (err != ECONNREFUSED || sdr_tool_now() - t0 > timeout_s) {
			fprintf(stderr, CMD ": --connect %s: %s\n", spec, strerror(err));
			break;
		}
		if (!said)
			fprintf(stderr,
				CMD ": --connect %s: refused; waiting up to %g s for the receiver "
				    "to listen (--timeout)\n",
				spec, timeout_s);
		usleep(50000);
	}
	freeaddrinfo(ai);
	if (fd >= 0)
		set_timeouts(fd, timeout_s);
	return fd;
}

static double sdr_tool_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((format(printf, 2, 3))) static int sdr_tool_printf(int fd, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line))
		return -1;
	return ql__write_all(fd, line, (size_t)n);
}

/* Read a line and check it starts with `word` (then a space or its end);
 * the rest in *rest. -1 with a message otherwise. */
/* This end's device while it is open. A soft+udp device in caller progress
 * mode (docs/progress.md) moves only when this process runs it: a wait for
 * the peer's next line must keep it going (an ACK held by --delay-us, a
 * retransmission), or the peer may wait for us while we wait for it. */
static struct ql_device *progress_dev;

static void sdr_tool_wait_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint32_t idle = 0;

	if (!progress_dev)
		return;
	/* spin while the device has work, then look every millisecond */
	while (poll(&p, 1, idle > 1024 ? 1 : 0) == 0) {
		if (ql_device_progress(progress_dev) > 0)
			idle = 0;
		else
			idle++;
	}
}

static int sdr_tool_expect(int fd, const char *word, char *line, size_t len, const char **rest)
{
	size_t w = strlen(word);

	sdr_tool_wait_readable(fd);
	if (ql__read_line(fd, line, len) < 0) {
		fprintf(stderr, CMD ": the peer went away (waiting for '%s')\n", word);
		return -1;
	}
	if (strncmp(line, word, w) || (line[w] && line[w] != ' ')) {
		if (!strncmp(line, "error ", 6))
			fprintf(stderr, CMD ": the peer failed: %s\n", line + 6);
		else
			fprintf(stderr, CMD ": unexpected '%s' from the peer (wanted '%s')\n", line,
				word);
		return -1;
	}
	if (rest)
		*rest = line[w] ? line + w + 1 : line + w;
	return 0;
}

/* ---- data pattern ----------------------------------------------------- */

static inline uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Message i's bytes: 8-byte words of a counter hash, so a byte in the wrong
 * place, a stale message or a zero page all show. */
static void sdr_tool_fill(uint8_t *buf, uint64_t len, uint64_t seed, uint32_t i)
{
	uint64_t base = mix(seed * 0x9e3779b97f4a7c15ull + i + 1), w;
	uint64_t n = len / 8, k;

	for (k = 0; k < n; k++) {
		w = mix(base + k);
		memcpy(buf + k * 8, &w, 8);
	}
	w = mix(base + n);
	memcpy(buf + n * 8, &w, len - n * 8);
}

/* The number of bytes of [off, off+n) of message i (len bytes, at buf)
 * that differ from its pattern. */
static uint64_t sdr_tool_check(const uint8_t *buf, uint64_t len, uint64_t off, uint64_t n,
			       uint64_t seed, uint32_t i)
{
	uint64_t base = mix(seed * 0x9e3779b97f4a7c15ull + i + 1), bad = 0, end = off + n;
	uint64_t k, w = 0, cur = UINT64_MAX;

	if (end > len)
		end = len;
	for (k = off; k < end; k++) {
		if (k / 8 != cur) {
			cur = k / 8;
			w = mix(base + cur);
		}
		bad += buf[k] != ((w >> (8 * (k % 8))) & 0xff);
	}
	return bad;
}

/* ---- the RC baseline ---------------------------------------------------- */

struct rc_side {
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *cq;
	struct ql_qp *qp;
	struct ql_mr *mr;
	uint8_t *buf;
	uint64_t len;
	uint64_t remote_addr;
	uint32_t remote_rkey;
};

static void rc_close(struct rc_side *s)
{
	if (s->qp)
		ql_qp_destroy(s->qp);
	if (s->mr)
		ql_mr_dereg(s->mr);
	if (s->buf)
		ql_pd_mem_free(s->pd, s->buf);
	if (s->cq)
		ql_cq_destroy(s->cq);
	if (s->pd)
		ql_pd_free(s->pd);
	if (s->dev) {
		progress_dev = NULL;
		ql_device_close(s->dev);
	}
	memset(s, 0, sizeof(*s));
}

static int rc_open(struct rc_side *s, const char *uri, uint64_t len)
{
	struct ql_qp_setup qa = { .qp_type = IBV_QPT_RC, .send_wr = 16, .recv_wr = 16 };
	int rc;

	memset(s, 0, sizeof(*s));
	s->len = len;
	if ((rc = ql_device_open(uri, &s->dev)) || !(progress_dev = s->dev) ||
	    (rc = ql_pd_alloc(s->dev, &s->pd)) || (rc = ql_cq_create(s->dev, 64, &s->cq)) ||
	    (rc = ql_pd_mem_alloc(s->pd, len, (void **)&s->buf)) ||
	    (rc = ql_mr_reg(s->pd, s->buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
			    &s->mr))) {
		tool_fail(CMD, "rc set-up", rc);
		rc_close(s);
		return rc;
	}
	if ((rc = ql_qp_setup(s->pd, &qa, &s->cq, &s->cq, &s->qp, NULL))) {
		tool_fail(CMD, "rc QP", rc);
		rc_close(s);
	}
	return rc;
}

static int rc_poll(struct rc_side *s, struct ibv_wc *wc, double timeout_s)
{
	double t0 = sdr_tool_now();
	uint32_t spins = 0;
	int n;

	for (;;) {
		n = ql_cq_poll(s->cq, 1, wc);
		if (n != 0)
			return n;
		if ((++spins & 1023) == 0) {
			if (sdr_tool_now() - t0 > timeout_s)
				return -ETIMEDOUT;
			sched_yield(); /* the NIC thread may need this core */
		}
	}
}

/* Exchange QP parameters (and the receiver's buffer) and connect. */
static int rc_connect(struct rc_side *s, int fd, bool sender)
{
	struct ql_conn_params me, peer;
	struct ql_qp_connect_opts co;
	int rc;

	if ((rc = ql_qp_local_params(s->qp, &me)))
		return rc;
	me.qp_type = IBV_QPT_RC;
	if (!sender) {
		me.vaddr = (uint64_t)(uintptr_t)s->buf;
		me.rkey = ql_mr_rkey(s->mr);
		me.length = s->len;
	}
	if (ql__send_params(fd, &me) || ql__recv_params(fd, &peer)) {
		fprintf(stderr, CMD ": exchanging RC parameters with the peer failed\n");
		return -EPROTO;
	}
	ql_qp_connect_opts_default(&co);
	if ((rc = ql_qp_connect(s->qp, &peer, &co))) {
		tool_fail(CMD, "connect the RC QP", rc);
		return rc;
	}
	if (sender) {
		if (peer.length < s->len || !peer.rkey) {
			fprintf(stderr, CMD ": the receiver's buffer is too small\n");
			return -EPROTO;
		}
		s->remote_addr = peer.vaddr;
		s->remote_rkey = peer.rkey;
	}
	return 0;
}

static int rc_send(struct rc_side *s, uint32_t i, double timeout_s)
{
	struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)s->buf,
			       .length = (uint32_t)s->len,
			       .lkey = ql_mr_lkey(s->mr) };
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;
	int rc;

	wr.wr_id = i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(i);
	wr.wr.rdma.remote_addr = s->remote_addr;
	wr.wr.rdma.rkey = s->remote_rkey;
	if ((rc = ql_qp_post_send(s->qp, &wr, &bad))) {
		tool_fail(CMD, "post the RC WRITE", rc);
		return rc;
	}
	rc = rc_poll(s, &wc, timeout_s);
	if (rc < 0) {
		fprintf(stderr, CMD ": message %" PRIu32 ": no RC completion within %.0f s\n", i,
			timeout_s);
		return rc;
	}
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, CMD ": message %" PRIu32 ": RC completion %s\n", i,
			ibv_wc_status_str(wc.status));
		return -EIO;
	}
	return 0;
}

static int rc_arm(struct rc_side *s)
{
	struct ibv_recv_wr wr = { 0 }, *bad;
	int rc = ql_qp_post_recv(s->qp, &wr, &bad);

	if (rc)
		tool_fail(CMD, "post an RC receive", rc);
	return rc;
}

static int rc_wait(struct rc_side *s, uint32_t i, double timeout_s)
{
	struct ibv_wc wc;
	int rc = rc_poll(s, &wc, timeout_s);

	if (rc < 0) {
		fprintf(stderr, CMD ": message %" PRIu32 " did not arrive within %.0f s\n", i,
			timeout_s);
		return rc;
	}
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
	    ntohl(wc.imm_data) != i || wc.byte_len != s->len) {
		fprintf(stderr,
			CMD ": message %" PRIu32 ": bad receive completion (%s, opcode %d, "
			    "imm %" PRIu32 ", %" PRIu32 " bytes)\n",
			i, ibv_wc_status_str(wc.status), (int)wc.opcode, ntohl(wc.imm_data),
			wc.byte_len);
		return -EIO;
	}
	return 0;
}

static void rc_counters(struct rc_side *s, char *out, size_t len)
{
	struct ql_device_counters c;

	memset(&c, 0, sizeof(c));
	ql_device_counters(s->dev, &c);
	snprintf(out, len,
		 "retransmits=%" PRIu64 " timeouts=%" PRIu64 " naks=%" PRIu64 " duplicates=%" PRIu64
		 " fault_drop=%" PRIu64,
		 c.retransmits, c.timeouts, c.naks_received + c.rc_nak_seq, c.duplicates,
		 c.fault_drop);
}

/* ---- SDR ends ------------------------------------------------------------ */

struct sdr_side {
	const struct sdr_tool_opts *o;
	struct ql_device *dev;
	struct ql_sdr_conn *conn;
	uint8_t *buf; /* sender: the message; receiver: the slot (after arm) */
	struct ql_mr *mr;
	struct ql_sdr_recv *rx;
	bool sender;
};

static enum ql_sdr_rel sdr_rel(enum sdr_tool_rel r)
{
	return r == REL_NONE ? QL_SDR_REL_NONE : r == REL_EC ? QL_SDR_REL_EC : QL_SDR_REL_SR;
}

static void sdrx_close(struct sdr_side *s)
{
	if (s->rx)
		ql_sdr_recv_release(s->rx);
	if (s->buf && s->sender)
		ql_sdr_buf_free(s->conn, s->buf, s->mr);
	if (s->conn)
		ql_sdr_conn_destroy(s->conn);
	if (s->dev) {
		progress_dev = NULL;
		ql_device_close(s->dev);
	}
	memset(s, 0, sizeof(*s));
}

static int sdrx_open(struct sdr_side *s, const struct sdr_tool_opts *o, const char *uri,
		     bool sender)
{
	struct ql_sdr_config cfg;
	int rc;

	memset(s, 0, sizeof(*s));
	s->o = o;
	s->sender = sender;
	ql_sdr_config_default(&cfg);
	cfg.max_msg_size = o->size;
	cfg.slots = 4;
	if (o->chunk)
		cfg.chunk_packets = o->chunk;
	if (o->window) {
		cfg.recv_depth = o->window;
		cfg.send_depth = o->window;
	}
	if (o->delay_us) {
		/* timers above the injected round trip: credits are reclaimed, and
		 * the tail asked for, only when the wire has had time to answer */
		uint64_t rtt = 2000ull * o->delay_us;

		cfg.credit_grace_ns = 5000000ull + 10 * rtt;
		if (cfg.rto_ns < 4 * rtt)
			cfg.rto_ns = 4 * rtt;
		if (cfg.nack_delay_ns < rtt)
			cfg.nack_delay_ns = rtt;
	}
	if (o->rel == REL_EC) {
		cfg.ec_data = o->ec_k;
		cfg.ec_parity = o->ec_m;
		cfg.parity_size = ql_sdr_ec_parity_size(o->size, o->ec_k, o->ec_m);
	}
	if ((rc = ql_device_open(uri, &s->dev)) || !(progress_dev = s->dev) ||
	    (rc = ql_sdr_conn_create(s->dev, &cfg, &s->conn))) {
		tool_fail(CMD, "sdr set-up", rc);
		sdrx_close(s);
	}
	return rc;
}

static int sdrx_connect(struct sdr_side *s, int fd, bool sender)
{
	struct ql_conn_params data, ctrl;
	char line[1024], spec[256];
	int rc;

	if ((rc = ql_sdr_conn_params_format(s->conn, line, sizeof(line))) < 0 ||
	    sdr_tool_printf(fd, "params %s\n", line)) {
		fprintf(stderr, CMD ": cannot send the QP parameters\n");
		return rc < 0 ? rc : -EIO;
	}
	{
		const char *rest;
		char in[1024];
		if (sdr_tool_expect(fd, "params", in, sizeof(in), &rest))
			return -EPROTO;
		if ((rc = ql_sdr_conn_params_parse(rest, &data, &ctrl))) {
			tool_fail(CMD, "the peer's QP parameters", rc);
			return rc;
		}
	}
	rc = sender ? ql_sdr_connect(s->conn, &data, &ctrl, (int)(s->o->timeout_s * 1000)) :
		      ql_sdr_accept(s->conn, &data, &ctrl, (int)(s->o->timeout_s * 1000));
	if (rc) {
		tool_fail(CMD, sender ? "connect" : "accept", rc);
		return rc;
	}
	if (!sender)
		return 0;
	if ((rc = ql_sdr_buf_alloc(s->conn, s->o->size, (void **)&s->buf, &s->mr))) {
		tool_fail(CMD, "the send buffer", rc);
		return rc;
	}
	/* loss (and the delay it replaces) on the data QP; the control QP keeps
	 * the device's delay and loses nothing */
	if (sdr_tool_fault_spec(s->o, spec, sizeof(spec)) == 0 && spec[0] &&
	    (rc = ql_qp_fault(ql_sdr_conn_data_qp(s->conn), spec))) {
		tool_fail(CMD, "fault injection on the data QP", rc);
		return rc;
	}
	return 0;
}

static uint8_t *sdrx_buf(struct sdr_side *s)
{
	return s->buf;
}

/* Drive progress; yield the core now and then when idle (on a small host
 * the NIC thread of soft+udp needs it). <0 when the connection broke. */
static int sdrx_spin(struct sdr_side *s, uint32_t *idle)
{
	int n = ql_sdr_progress(s->conn);

	if (n < 0)
		return n;
	if (n == 0 && (++*idle & 255) == 0)
		sched_yield();
	return 0;
}

static int sdrx_send(struct sdr_side *s, uint32_t i, double timeout_s, double *t0)
{
	struct ql_sdr_send_opts so = { .rel = sdr_rel(s->o->rel) };
	struct ql_sdr_send *tx;
	double end = sdr_tool_now() + timeout_s;
	uint32_t idle = 0;
	int rc, st = 0;

	/* the clock starts once the receiver's clear-to-send is here (RC has
	 * none): completion time is the transfer's, not the CTS's flight */
	while (ql_sdr_conn_cts_pending(s->conn) == 0) {
		if ((rc = sdrx_spin(s, &idle)) || sdr_tool_now() > end) {
			fprintf(stderr, CMD ": message %" PRIu32 ": no clear-to-send\n", i);
			return rc ? rc : -ETIMEDOUT;
		}
	}
	*t0 = sdr_tool_now();
	if ((rc = ql_sdr_send_post(s->conn, s->buf, s->o->size, s->mr, &so, &tx))) {
		tool_fail(CMD, "post the message", rc);
		return rc;
	}
	while (!ql_sdr_send_poll(tx, &st)) {
		if ((rc = sdrx_spin(s, &idle)))
			break;
		if (sdr_tool_now() > end) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	if (rc) {
		fprintf(stderr, CMD ": message %" PRIu32 ": %s\n", i, ql_strerror(rc));
		return rc; /* tx stays with the connection, destroyed with it */
	}
	ql_sdr_send_release(tx);
	if (st)
		fprintf(stderr, CMD ": message %" PRIu32 " failed: %s\n", i, ql_strerror(st));
	return st;
}

static int sdrx_arm(struct sdr_side *s, uint32_t i)
{
	struct ql_sdr_recv_opts ro = { .rel = sdr_rel(s->o->rel) };
	uint32_t idle = 0;
	int rc;

	(void)i;
	if (s->rx) {
		ql_sdr_recv_release(s->rx);
		s->rx = NULL;
	}
	while ((rc = ql_sdr_recv_post(s->conn, s->o->size, &ro, &s->rx)) == -EAGAIN)
		if (sdrx_spin(s, &idle))
			break;
	if (rc) {
		tool_fail(CMD, "post the receive", rc);
		return rc;
	}
	/* the sender sends only after our "ready": clearing now races nothing */
	s->buf = ql_sdr_recv_data(s->rx);
	memset(s->buf, 0, s->o->size);
	return 0;
}

/* Wait for message i: 0 complete, 1 ended incomplete (reliability none), <0
 * error. got/total: data packets present / in the message. */
static int sdrx_wait(struct sdr_side *s, uint32_t i, int fd, double timeout_s, uint64_t *got,
		     uint64_t *total)
{
	double end = sdr_tool_now() + timeout_s, grace = 0;
	uint32_t idle = 0, n = 0;
	int rc, st = 0, done;

	for (;;) {
		if ((rc = sdrx_spin(s, &idle)))
			return rc;
		done = ql_sdr_recv_poll(s->rx, &st);
		if (done)
			break;
		/* reliability none: when the sender has sent everything and the
		 * scheme has not ended the message after a grace, take what
		 * arrived */
		if ((++n & 1023) == 0) {
			double now = sdr_tool_now();
			struct pollfd p = { .fd = fd, .events = POLLIN };
			char line[128];

			if (!grace && poll(&p, 1, 0) == 1) {
				if (sdr_tool_expect(fd, "sent", line, sizeof(line), NULL))
					return -EPROTO;
				grace = now + 0.2 + 4e-6 * s->o->delay_us;
			}
			if (grace && now > grace)
				break;
			if (now > end)
				return -ETIMEDOUT;
		}
	}
	*total = ql_sdr_recv_packets(s->rx);
	*got = ql_sdr_recv_bitmap(s->rx, NULL, 0);
	if (done && st && st != -ENODATA) {
		fprintf(stderr, CMD ": message %" PRIu32 " failed at the receiver: %s\n", i,
			ql_strerror(st));
		return st;
	}
	/* the "sent" line, if it has not been read yet */
	if (!grace) {
		char line[128];
		if (sdr_tool_expect(fd, "sent", line, sizeof(line), NULL))
			return -EPROTO;
	}
	return *got == *total ? 0 : 1;
}

/* Bytes that differ from message i's pattern, in the packets that arrived. */
static uint64_t sdrx_check(struct sdr_side *s, uint64_t seed, uint32_t i)
{
	uint32_t mtu = ql_sdr_conn_mtu(s->conn), npk = ql_sdr_recv_packets(s->rx);
	uint64_t bad = 0;

	if (ql_sdr_recv_bitmap(s->rx, NULL, 0) == npk)
		return sdr_tool_check(s->buf, s->o->size, 0, s->o->size, seed, i);
	for (uint32_t p = 0; p < npk; p++) {
		uint64_t off = (uint64_t)p * mtu;
		uint64_t n = s->o->size - off < mtu ? s->o->size - off : mtu;

		if (ql_sdr_recv_packet_done(s->rx, p))
			bad += sdr_tool_check(s->buf, s->o->size, off, n, seed, i);
	}
	return bad;
}

static void sdrx_counters(struct sdr_side *s, char *out, size_t len)
{
	struct ql_sdr_stats st;
	struct ql_device_counters dc;
	size_t n;

	memset(&dc, 0, sizeof(dc));
	ql_device_counters(s->dev, &dc);
	ql_sdr_conn_stats(s->conn, &st);
	if (s->sender)
		snprintf(out, len,
			 "packets=%" PRIu64 " retransmits=%" PRIu64 " nacks=%" PRIu64
			 " timeouts=%" PRIu64 " credit_stalls=%" PRIu64
			 " credits_reclaimed=%" PRIu64,
			 st.pkts_sent, st.pkts_retransmitted, st.nacks_received, st.timeouts,
			 st.credit_stalls, st.credits_reclaimed);
	else
		snprintf(out, len,
			 "packets=%" PRIu64 " recovered=%" PRIu64 " nacks=%" PRIu64
			 " duplicates=%" PRIu64 " drop_bad_id=%" PRIu64 " drop_bad_offset=%" PRIu64
			 " drop_bad_len=%" PRIu64,
			 st.pkts_received, st.pkts_recovered, st.nacks_sent, st.pkts_duplicate,
			 st.drop_bad_id, st.drop_bad_offset, st.drop_bad_len);
	/* the device's view: what the wire and the NIC dropped */
	n = strlen(out);
	snprintf(out + n, len - n,
		 " dev_fault_drop=%" PRIu64 " dev_no_recv=%" PRIu64 " dev_uc_msgs_dropped=%" PRIu64,
		 dc.fault_drop, dc.uc_drop_no_recv, dc.uc_msgs_dropped);
}

/* ---- one end ------------------------------------------------------------- */

struct end {
	const struct sdr_tool_opts *o;
	bool sender;
	struct rc_side rc;
	struct sdr_side sdr;
};

static int end_open(struct end *e, const struct sdr_tool_opts *o, const char *uri, bool sender)
{
	char dev_uri[QL_DEVICE_URI_MAX + 96];
	int rc;

	memset(e, 0, sizeof(*e));
	e->o = o;
	e->sender = sender;
	if ((rc = uri_with_delay(uri, o->delay_us, dev_uri, sizeof(dev_uri)))) {
		fprintf(stderr, CMD ": device URI too long\n");
		return rc;
	}
	if (o->rel == REL_RC)
		return rc_open(&e->rc, dev_uri, o->size);
	return sdrx_open(&e->sdr, o, dev_uri, sender);
}

static void end_close(struct end *e)
{
	if (e->o && e->o->rel == REL_RC)
		rc_close(&e->rc);
	else
		sdrx_close(&e->sdr);
}

static int end_connect(struct end *e, int fd)
{
	char spec[256];
	int rc;

	rc = e->o->rel == REL_RC ? rc_connect(&e->rc, fd, e->sender) :
				   sdrx_connect(&e->sdr, fd, e->sender);
	if (rc || !e->sender || e->o->rel != REL_RC)
		return rc;
	/* RC: the loss applies to the requests the sender's QP sends */
	if (sdr_tool_fault_spec(e->o, spec, sizeof(spec)) == 0 && spec[0]) {
		rc = ql_qp_fault(e->rc.qp, spec);
		if (rc)
			tool_fail(CMD, "fault injection on the RC QP", rc);
	}
	return rc;
}

static uint8_t *end_buf(struct end *e)
{
	return e->o->rel == REL_RC ? e->rc.buf : sdrx_buf(&e->sdr);
}

static void end_counters(struct end *e, char *out, size_t len)
{
	if (e->o->rel == REL_RC)
		rc_counters(&e->rc, out, len);
	else
		sdrx_counters(&e->sdr, out, len);
}

/* ---- the session ----------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int run_sender(const struct sdr_tool_opts *o, int fd)
{
	struct end e;
	char line[1024], ctr[512];
	const char *rest;
	double *t = NULL, t0, med;
	uint32_t i, ok = 0, partial = 0;
	int rc, ret = 1;

	if (sdr_tool_printf(fd,
			    "session rel=%s size=%" PRIu64 " count=%" PRIu32 " k=%" PRIu32
			    " m=%" PRIu32 " chunk=%" PRIu32 " seed=%" PRIu64 " delay_us=%" PRIu32
			    " window=%" PRIu32 "\n",
			    sdr_tool_rel_name(o->rel), o->size, o->count, o->ec_k, o->ec_m,
			    o->chunk, o->seed, o->delay_us, o->window)) {
		fprintf(stderr, CMD ": cannot talk to the receiver\n");
		return 1;
	}
	if (sdr_tool_expect(fd, "accept", line, sizeof(line), NULL))
		return 1;
	if (end_open(&e, o, o->device, true))
		return 1;
	t = calloc(o->count, sizeof(*t));
	if (!t || end_connect(&e, fd))
		goto out;
	for (i = 0; i < o->count; i++) {
		uint64_t bad = 0, got = 0, total = 0;

		if (sdr_tool_expect(fd, "ready", line, sizeof(line), NULL))
			goto out;
		sdr_tool_fill(end_buf(&e), o->size, o->seed, i);
		t0 = sdr_tool_now();
		rc = o->rel == REL_RC ? rc_send(&e.rc, i, o->timeout_s) :
					sdrx_send(&e.sdr, i, o->timeout_s, &t0);
		t[i] = sdr_tool_now() - t0;
		if (rc) {
			sdr_tool_printf(fd, "error message %" PRIu32 " failed at the sender\n", i);
			goto out;
		}
		if (sdr_tool_printf(fd, "sent %" PRIu32 "\n", i) ||
		    sdr_tool_expect(fd, "ok", line, sizeof(line), &rest))
			goto out;
		if (sscanf(rest, "%*u bad=%" SCNu64 " got=%" SCNu64 " total=%" SCNu64, &bad, &got,
			   &total) != 3) {
			fprintf(stderr, CMD ": bad verdict '%s' from the receiver\n", line);
			goto out;
		}
		if (bad) {
			fprintf(stderr,
				CMD ": message %" PRIu32 ": %" PRIu64
				    " bytes differ at the receiver\n",
				i, bad);
			goto out;
		}
		if (got == total)
			ok++;
		else
			partial++;
	}
	end_counters(&e, ctr, sizeof(ctr));
	if (sdr_tool_expect(fd, "stats", line, sizeof(line), &rest))
		goto out;
	qsort(t, o->count, sizeof(*t), cmp_double);
	med = o->count % 2 ? t[o->count / 2] : (t[o->count / 2 - 1] + t[o->count / 2]) / 2;
	printf("qlink sdr: reliability %s, %" PRIu32 " x %" PRIu64 " bytes, loss %g (seed %" PRIu64
	       "), delay %" PRIu32 " us each way\n",
	       sdr_tool_rel_name(o->rel), o->count, o->size, o->loss, o->seed, o->delay_us);
	printf("completion time: median %.1f us, min %.1f us, max %.1f us\n", med * 1e6, t[0] * 1e6,
	       t[o->count - 1] * 1e6);
	printf("goodput: %.1f MB/s (median message)\n", (double)o->size / med / 1e6);
	printf("sender: %s\n", ctr);
	printf("receiver: %s\n", rest);
	printf("delivered: %" PRIu32 " of %" PRIu32 " messages complete and byte-identical", ok,
	       o->count);
	if (partial)
		printf(", %" PRIu32 " partial (reliability none: what arrived is exact)", partial);
	printf("\n");
	printf("result rel=%s size=%" PRIu64 " count=%" PRIu32 " loss=%g delay_us=%" PRIu32
	       " median_us=%.1f min_us=%.1f max_us=%.1f goodput_MBps=%.1f ok=%" PRIu32 " %s\n",
	       sdr_tool_rel_name(o->rel), o->size, o->count, o->loss, o->delay_us, med * 1e6,
	       t[0] * 1e6, t[o->count - 1] * 1e6, (double)o->size / med / 1e6, ok, ctr);
	ret = (ok == o->count || (o->rel == REL_NONE && ok + partial == o->count)) ? 0 : 1;
out:
	free(t);
	end_close(&e);
	return ret;
}

static int run_receiver(struct sdr_tool_opts *o, int fd)
{
	struct end e;
	char line[1024], rel[16], ctr[512];
	const char *rest;
	uint32_t i;
	int ret = 1, rc;

	memset(&e, 0, sizeof(e));
	if (sdr_tool_expect(fd, "session", line, sizeof(line), &rest))
		return 1;
	if (sscanf(rest,
		   "rel=%15s size=%" SCNu64 " count=%" SCNu32 " k=%" SCNu32 " m=%" SCNu32
		   " chunk=%" SCNu32 " seed=%" SCNu64 " delay_us=%" SCNu32 " window=%" SCNu32,
		   rel, &o->size, &o->count, &o->ec_k, &o->ec_m, &o->chunk, &o->seed, &o->delay_us,
		   &o->window) != 9 ||
	    o->window > 65536 || parse_rel(rel, &o->rel) || o->size < 1 || o->size > (1ull << 30) ||
	    o->count < 1) {
		fprintf(stderr, CMD ": bad session '%s' from the sender\n", rest);
		sdr_tool_printf(fd, "error bad session\n");
		return 1;
	}
	if (end_open(&e, o, o->device, false)) {
		sdr_tool_printf(fd, "error the receiver cannot open its device\n");
		return 1;
	}
	if (sdr_tool_printf(fd, "accept\n") || end_connect(&e, fd))
		goto out;
	for (i = 0; i < o->count; i++) {
		uint64_t got = 1, total = 1, bad;

		if (o->rel == REL_RC)
			memset(e.rc.buf, 0, o->size); /* nothing stale can pass */
		rc = o->rel == REL_RC ? rc_arm(&e.rc) : sdrx_arm(&e.sdr, i);
		if (rc || sdr_tool_printf(fd, "ready %" PRIu32 "\n", i))
			goto out;
		if (o->rel == REL_RC) {
			rc = rc_wait(&e.rc, i, o->timeout_s);
			if (!rc)
				rc = sdr_tool_expect(fd, "sent", line, sizeof(line), NULL);
			bad = rc ? 0 : sdr_tool_check(e.rc.buf, o->size, 0, o->size, o->seed, i);
		} else {
			rc = sdrx_wait(&e.sdr, i, fd, o->timeout_s, &got, &total);
			bad = rc < 0 ? 0 : sdrx_check(&e.sdr, o->seed, i);
		}
		if (rc < 0) {
			sdr_tool_printf(fd, "error message %" PRIu32 " did not arrive\n", i);
			goto out;
		}
		if (sdr_tool_printf(fd,
				    "ok %" PRIu32 " bad=%" PRIu64 " got=%" PRIu64 " total=%" PRIu64
				    "\n",
				    i, bad, got, total))
			goto out;
		if (bad)
			fprintf(stderr, CMD ": message %" PRIu32 ": %" PRIu64 " bytes differ\n", i,
				bad);
	}
	end_counters(&e, ctr, sizeof(ctr));
	if (sdr_tool_printf(fd, "stats %s\n", ctr))
		goto out;
	ret = 0;
out:
	end_close(&e);
	return ret;
}

/* ---- main ------------------------------------------------------------------ */

int tool_sdr(int argc, char **argv)
{
	struct sdr_tool_opts o = {
		.size = 1u << 20,
		.count = 10,
		.rel = REL_SR,
		.ec_k = 8,
		.ec_m = 2,
		.seed = 1,
		.timeout_s = 30,
	};
	bool pair = false;
	int c, fd = -1, sv[2], ret;

	if (argc >= 2 && (!strcmp(argv[1], "send") || !strcmp(argv[1], "recv"))) {
		o.mode = argv[1];
		argc--;
		argv++;
	}
	optind = 0;
	while ((c = tool_getopt(&sdr_cmd, argc, argv)) != TOOL_END) {
		switch (c) {
		case O_DEVICE:
			if (tool_device_uri(optarg))
				return tool_bad("sdr", "--device", optarg);
			o.device = optarg;
			break;
		case O_PEER_DEVICE:
			if (tool_device_uri(optarg))
				return tool_bad("sdr", "--peer-device", optarg);
			o.peer_device = optarg;
			break;
		case O_LISTEN:
			if (tool_listen_port(optarg))
				return tool_bad("sdr", "--listen", optarg);
			o.listen = optarg;
			break;
		case O_CONNECT:
			if (tool_hostport(optarg, 0))
				return tool_bad("sdr", "--connect", optarg);
			o.connect = optarg;
			break;
		case O_PAIR:
			pair = true;
			break;
		case O_SIZE:
			if (parse_size(optarg, 1, 1ull << 30, &o.size))
				return tool_bad(CMD, "--size", optarg);
			break;
		case O_COUNT:
			if (tool_u32(optarg, 1, 1000000, &o.count))
				return tool_bad(CMD, "--count", optarg);
			break;
		case O_REL:
			if (parse_rel(optarg, &o.rel))
				return tool_bad(CMD, "--reliability", optarg);
			break;
		case O_EC:
			if (sscanf(optarg, "%" SCNu32 ",%" SCNu32 "%c", &o.ec_k, &o.ec_m,
				   (char[1]){ 0 }) != 2 ||
			    o.ec_k < 1 || o.ec_k > 32 || o.ec_m < 1 || o.ec_m > 16 ||
			    o.ec_k + o.ec_m > 48)
				return tool_bad(CMD, "--ec (K,M: K 1..32, M 1..16)", optarg);
			break;
		case O_CHUNK:
			if (tool_u32(optarg, 1, 65536, &o.chunk))
				return tool_bad(CMD, "--chunk (1 .. 65536)", optarg);
			break;
		case O_LOSS:
			if (tool_double(optarg, 0, 0.5, &o.loss))
				return tool_bad(CMD, "--loss (0 .. 0.5)", optarg);
			break;
		case O_FAULT:
			o.fault = optarg;
			break;
		case O_SEED:
			if (tool_u64(optarg, 0, UINT64_MAX, &o.seed))
				return tool_bad(CMD, "--seed", optarg);
			break;
		case O_DELAY:
			if (tool_u32(optarg, 0, 1000000, &o.delay_us))
				return tool_bad(CMD, "--delay-us (0 .. 1000000)", optarg);
			break;
		case O_TIMEOUT:
			if (tool_time(optarg, 0.1, 3600, &o.timeout_s))
				return tool_bad(CMD, "--timeout", optarg);
			break;
		case O_WINDOW:
			if (tool_u32(optarg, 4, 65536, &o.window))
				return tool_bad(CMD, "--window (4 .. 65536)", optarg);
			break;
		default:
			return 2;
		}
	}
	if (optind < argc) {
		return tool_usage("sdr", "unexpected argument '%s'", argv[optind]);
	}
	if (!o.mode && !pair) {
		return tool_usage("sdr", "say send, recv or --pair");
	}
	if (o.mode && pair) {
		return tool_usage("sdr", "--pair forks both ends; it takes no send/recv");
	}
	if (!o.device) {
		return tool_usage("sdr", "--device URI is required");
	}
	if (pair && !o.peer_device)
		o.peer_device = o.device;
	if ((o.loss > 0 || o.fault || o.delay_us) &&
	    (!is_udp(o.device) || (pair && !is_udp(o.peer_device)))) {
		return tool_usage("sdr", "--loss, --fault and --delay-us need soft+udp devices "
					 "(fault injection is soft+udp's)");
	}
	if (o.loss > 0 && o.fault) {
		return tool_usage("sdr", "give --loss or --fault, not both");
	}
	if (pair && !strncmp(o.device, "soft://", 7)) {
		return tool_usage("sdr", "--pair runs two processes: use soft+shm://NAME or "
					 "soft+udp://IP, not soft://loop");
	}
	if (pair && is_udp(o.device) && !strcmp(o.device, o.peer_device)) {
		return tool_usage("sdr", "two soft+udp ends need two addresses: give --peer-device "
					 "(e.g. soft+udp://127.0.0.2)");
	}
	if (o.mode && !strcmp(o.mode, "recv")) {
		if (!o.listen || o.connect) {
			return tool_usage("sdr",
					  "recv needs --listen [ADDR:]PORT (and no --connect)");
		}
		fd = oob_listen(o.listen, o.timeout_s);
		if (fd < 0)
			return 1;
		ret = run_receiver(&o, fd);
		close(fd);
		return ret;
	}
	if (o.mode) {
		if (!o.connect || o.listen) {
			return tool_usage("sdr",
					  "send needs --connect HOST:PORT (and no --listen)");
		}
		fd = oob_connect(o.connect, o.timeout_s);
		if (fd < 0)
			return 1;
		ret = run_sender(&o, fd);
		close(fd);
		return ret;
	}
	/* --pair: the receiver is a child on its own device */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		perror(CMD ": socketpair");
		return 1;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror(CMD ": fork");
		return 1;
	}
	if (pid == 0) {
		struct sdr_tool_opts ro = o;
		close(sv[0]);
		set_timeouts(sv[1], o.timeout_s);
		ro.device = o.peer_device;
		_exit(run_receiver(&ro, sv[1]));
	}
	close(sv[1]);
	set_timeouts(sv[0], o.timeout_s);
	ret = run_sender(&o, sv[0]);
	close(sv[0]);
	{
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, CMD ": the receiver failed\n");
			ret = 1;
		}
	}
	return ret;
}
