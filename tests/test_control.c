/* SPDX-License-Identifier: MIT */
/*
 * Control plane over 127.0.0.1: the handshake, duplicates, reordering, loss,
 * session loss, several sessions, the allowlist, authentication, and bad
 * datagrams sent at a running server while a connected QCS keeps being
 * served. The server runs in a thread; every wait is bounded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink/control.h"
#include "qlink/error.h"
#include "qlink/log.h"

static const uint8_t secret[] = "qlink-test-secret";
#define SECRET_LEN (sizeof(secret) - 1)

struct fx {
	struct ql_ctl_server *srv;
	pthread_t thread;
	int stop;
	int offers, accepts, starts, stops, aborts, completes, losts, statuses;
	char addr[32];
};

#define CNT(f) __atomic_load_n(&(f), __ATOMIC_SEQ_CST)
#define INC(f) __atomic_fetch_add(&(f), 1, __ATOMIC_SEQ_CST)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int op_offer(void *ctx, struct ql_ctl_session *s, uint32_t n, struct ql_conn_params *out)
{
	struct fx *f = ctx;

	INC(f->offers);
	for (uint32_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].qpn = 0x100 + i;
		out[i].psn = 7;
		inet_pton(AF_INET6, "fd71:201::1f40:3", out[i].gid.raw);
		out[i].mtu = IBV_MTU_4096;
		out[i].vaddr = 0x7f3a1c000000ull + i * 0x10000;
		out[i].rkey = 0x8c2d5001u;
		out[i].length = 64 + 16 * 256;
		out[i].num_slots = 16;
		out[i].slot_size = 256;
	}
	return 0;
}

static int op_accept(void *ctx, struct ql_ctl_session *s, const struct ql_conn_params *c,
		     uint32_t n)
{
	struct fx *f = ctx;

	INC(f->accepts);
	return c[0].qpn == 0xdead ? ql_error_set(-EINVAL, "QP 0xdead is not welcome") : 0;
}

#define SIMPLE_OP(name, field)                                    \
	static int op_##name(void *ctx, struct ql_ctl_session *s) \
	{                                                         \
		INC(((struct fx *)ctx)->field);                   \
		return 0;                                         \
	}
SIMPLE_OP(start, starts)
SIMPLE_OP(stop, stops)
SIMPLE_OP(abort, aborts)
SIMPLE_OP(complete, completes)

static int op_status(void *ctx, struct ql_ctl_session *s, char *json, size_t len)
{
	struct fx *f = ctx;

	INC(f->statuses);
	snprintf(json, len, "{\"requests\":42,\"state\":\"%s\"}",
		 ql_ctl_state_name(ql_ctl_session_state(s)));
	return 0;
}

static void op_lost(void *ctx, struct ql_ctl_session *s)
{
	INC(((struct fx *)ctx)->losts);
}

static const struct ql_ctl_server_ops ops = {
	.offer = op_offer,
	.accept = op_accept,
	.start = op_start,
	.stop = op_stop,
	.abort = op_abort,
	.complete = op_complete,
	.status = op_status,
	.lost = op_lost,
};

static void *server_main(void *arg)
{
	struct fx *f = arg;

	while (!CNT(f->stop))
		assert_true(ql_ctl_server_poll(f->srv, 10) >= 0);
	return NULL;
}

static struct fx *fx_start_cfg(const struct ql_ctl_server_config *cfg)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(ql_ctl_server_create(cfg, &ops, f, &f->srv), 0);
	assert_true(ql_ctl_server_port(f->srv) > 0);
	snprintf(f->addr, sizeof(f->addr), "127.0.0.1:%u", ql_ctl_server_port(f->srv));
	assert_int_equal(pthread_create(&f->thread, NULL, server_main, f), 0);
	return f;
}

static struct fx *fx_start(const char *const *allow, bool with_secret, uint32_t timeout_ms)
{
	struct ql_ctl_server_config cfg = {
		.bind_addr = "127.0.0.1",
		.allow = allow,
		.secret = with_secret ? secret : NULL,
		.secret_len = with_secret ? SECRET_LEN : 0,
		.max_sessions = 8,
		.session_timeout_ms = timeout_ms ? timeout_ms : 5000,
	};

	return fx_start_cfg(&cfg);
}

static void fx_stop(struct fx *f)
{
	__atomic_store_n(&f->stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(f->thread, NULL);
	ql_ctl_server_destroy(f->srv);
	free(f);
}

static struct ql_ctl_stats stats(struct fx *f)
{
	struct ql_ctl_stats st;

	ql_ctl_server_stats(f->srv, &st);
	return st;
}

static struct ql_ctl_client *client(struct fx *f, const uint8_t *key, size_t key_len,
				    const char *bind_addr, uint32_t timeout_ms, uint32_t retries)
{
	struct ql_ctl_client_config cfg = {
		.name = "test-qcs",
		.bind_addr = bind_addr,
		.timeout_ms = timeout_ms,
		.retries = retries,
	};
	struct ql_ctl_client *cl;

	assert_int_equal(ql_ctl_client_create(f->addr, key, key_len, &cfg, &cl), 0);
	return cl;
}

static void my_params(struct ql_conn_params *p, uint32_t n, uint32_t qpn)
{
	for (uint32_t i = 0; i < n; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].qpn = qpn + i;
		inet_pton(AF_INET6, "fd71:201::1f40:9", p[i].gid.raw);
		p[i].mtu = IBV_MTU_1024;
	}
}

static void connect_client(struct ql_ctl_client *cl, uint32_t n)
{
	struct ql_conn_params rth[QL_CTL_MAX_CHANNELS], mine[QL_CTL_MAX_CHANNELS];

	assert_int_equal(ql_ctl_client_discover(cl, n, rth), 0);
	my_params(mine, n, 0x500);
	assert_int_equal(ql_ctl_client_ack(cl, mine, n), 0);
}

/* ---- raw datagrams ------------------------------------------------------ */

static int raw_socket(struct fx *f, const char *from)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	assert_true(fd >= 0);
	inet_pton(AF_INET, from, &a.sin_addr);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	to.sin_port = htons(ql_ctl_server_port(f->srv));
	assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	return fd;
}

static void raw_send(int fd, const void *buf, size_t len)
{
	assert_int_equal(send(fd, buf, len, 0), (ssize_t)len);
}

/* Wait up to ms for one datagram; returns its length or -1. */
static int raw_recv(int fd, uint8_t *buf, size_t cap, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) <= 0)
		return -1;
	return (int)recv(fd, buf, cap, 0);
}

static size_t fmt(const struct ql_ctl_msg *m, bool mac, uint8_t *buf)
{
	int n = ql_ctl_format(m, mac ? secret : NULL, mac ? SECRET_LEN : 0, buf, QL_CTL_MAX_DGRAM);

	assert_true(n > 0);
	return (size_t)n;
}

static struct ql_ctl_msg req(enum ql_ctl_type t, uint64_t session, uint64_t seq)
{
	struct ql_ctl_msg m;

	memset(&m, 0, sizeof(m));
	m.type = t;
	m.session = session;
	m.seq = seq;
	m.pad_to = QL_CTL_REQUEST_PAD; /* as the reference client does */
	if (t == QL_CTL_DISCOVER) {
		m.nchannels = 1;
		strcpy(m.name, "raw");
	}
	if (t == QL_CTL_ACK) {
		m.nchannels = 1;
		my_params(m.ch, 1, 0x600);
	}
	return m;
}

/* Expect a reply; parse it (with the secret if mac) into m. */
static void expect_reply(int fd, bool mac, struct ql_ctl_msg *m, enum ql_ctl_type type)
{
	uint8_t buf[2048];
	int n = raw_recv(fd, buf, sizeof(buf), 2000);

	assert_true(n > 0);
	assert_int_equal(ql_ctl_parse(buf, (size_t)n, mac ? secret : NULL, mac ? SECRET_LEN : 0, m),
			 0);
	if (m->type != type)
		fail_msg("expected %s, got %s (%s: %s)", ql_ctl_type_name(type),
			 ql_ctl_type_name(m->type), m->code, m->text);
}

static void expect_error(int fd, const char *code)
{
	struct ql_ctl_msg m;

	expect_reply(fd, false, &m, QL_CTL_ERROR);
	assert_string_equal(m.code, code);
}

/* The cookie round trip by hand: m (a DISCOVER) gets the server's RETRY and
 * is formatted again, with its cookie, into d. */
static size_t raw_discover(int fd, struct ql_ctl_msg *m, bool mac, uint8_t *d)
{
	struct ql_ctl_msg rep;
	size_t n = fmt(m, mac, d);

	raw_send(fd, d, n);
	expect_reply(fd, mac, &rep, QL_CTL_RETRY);
	assert_int_equal(strlen(rep.cookie), QL_CTL_COOKIE_HEX);
	memcpy(m->cookie, rep.cookie, sizeof(m->cookie));
	return fmt(m, mac, d);
}

static void expect_silence(int fd, int ms)
{
	uint8_t buf[2048];

	assert_int_equal(raw_recv(fd, buf, sizeof(buf), ms), -1);
}

/* ---- tests -------------------------------------------------------------- */

static void test_roundtrip_format_parse(void **state)
{
	struct ql_ctl_msg m = req(QL_CTL_ACK, 0x0123456789abcdefull, 9), out;
	uint8_t buf[QL_CTL_MAX_DGRAM];
	size_t n = fmt(&m, true, buf);

	assert_int_equal(ql_ctl_parse(buf, n, secret, SECRET_LEN, &out), 0);
	assert_true(out.mac_ok);
	assert_int_equal(out.session, m.session);
	assert_int_equal(out.seq, 9);
	assert_int_equal(out.nchannels, 1);
	assert_int_equal(out.ch[0].qpn, 0x600);
	assert_int_equal(out.ch[0].mtu, IBV_MTU_1024);
	assert_memory_equal(out.ch[0].gid.raw, m.ch[0].gid.raw, 16);
	/* Without a secret the MAC line is tolerated; with a wrong one it is refused. */
	assert_int_equal(ql_ctl_parse(buf, n, NULL, 0, &out), 0);
	assert_int_equal(ql_ctl_parse(buf, n, (const uint8_t *)"other", 5, &out), -EACCES);
	/* Any single flipped byte of the JSON breaks the MAC (or the JSON). */
	buf[10] ^= 1;
	assert_int_not_equal(ql_ctl_parse(buf, n, secret, SECRET_LEN, &out), 0);
	/* The full parameter set survives a round trip, 64-bit values included. */
	memset(&m, 0, sizeof(m));
	m.type = QL_CTL_CONNECTION_PARAMS;
	m.proto = QL_CTL_PROTO;
	m.nchannels = QL_CTL_MAX_CHANNELS;
	for (int i = 0; i < QL_CTL_MAX_CHANNELS; i++) {
		m.ch[i].qpn = 0xffffff;
		m.ch[i].psn = 0xffffff;
		memset(m.ch[i].gid.raw, 0xab, 16);
		m.ch[i].mtu = IBV_MTU_4096;
		m.ch[i].vaddr = UINT64_MAX;
		m.ch[i].rkey = UINT32_MAX;
		m.ch[i].length = UINT64_MAX - 1;
		m.ch[i].num_slots = UINT32_MAX;
		m.ch[i].slot_size = UINT32_MAX;
	}
	n = fmt(&m, true, buf);
	assert_true(n <= QL_CTL_MAX_DGRAM);
	assert_int_equal(ql_ctl_parse(buf, n, secret, SECRET_LEN, &out), 0);
	assert_memory_equal(out.ch, m.ch, sizeof(m.ch));
}

static void test_handshake(void **state)
{
	struct fx *f = fx_start(NULL, false, 0);
	struct ql_ctl_client *cl = client(f, NULL, 0, NULL, 0, 0);
	struct ql_conn_params rth[2], mine[2];
	char json[256];

	assert_int_equal(ql_ctl_client_discover(cl, 2, rth), 0);
	assert_int_equal(rth[0].qpn, 0x100);
	assert_int_equal(rth[1].qpn, 0x101);
	assert_int_equal(rth[1].vaddr, 0x7f3a1c010000ull);
	assert_int_equal(rth[0].rkey, 0x8c2d5001u);
	assert_int_equal(rth[0].num_slots, 16);
	assert_int_equal(rth[0].slot_size, 256);
	assert_int_equal(rth[0].length, 64 + 16 * 256);
	my_params(mine, 2, 0x700);
	assert_int_equal(ql_ctl_client_ack(cl, mine, 2), 0);
	assert_int_equal(ql_ctl_client_start(cl), 0);
	assert_int_equal(ql_ctl_client_status(cl, json, sizeof(json)), 0);
	assert_non_null(strstr(json, "\"state\":\"RUNNING\""));
	assert_int_equal(ql_ctl_client_keepalive(cl), 0);
	assert_int_equal(ql_ctl_client_stop(cl), 0);
	/* START before ACK would be bad_state; a second STOP is too. */
	assert_int_equal(ql_ctl_client_stop(cl), -EPROTO);
	assert_non_null(strstr(ql_error_detail(), "bad_state"));
	assert_int_equal(ql_ctl_client_start(cl), 0);
	assert_int_equal(ql_ctl_client_complete(cl), 0);
	assert_int_equal(ql_ctl_client_abort(cl), -EPROTO);

	assert_int_equal(CNT(f->offers), 1);
	assert_int_equal(CNT(f->accepts), 1);
	assert_int_equal(CNT(f->starts), 2);
	assert_int_equal(CNT(f->stops), 1);
	assert_int_equal(CNT(f->completes), 1);
	assert_int_equal(CNT(f->aborts), 0);
	assert_int_equal(stats(f).sessions_active, 0);
	ql_ctl_client_destroy(cl);
	fx_stop(f);
}

/* docs/control-plane.md §3 as a table: in each open state, each request is
 * valid or answered bad_state (counted by the server, the state unchanged:
 * the STATUS after says so). ACK only in OFFERED; START in CONNECTED and
 * STOPPED; STOP in RUNNING; COMPLETE in CONNECTED, RUNNING, STOPPED; ABORT
 * in every open state; STATUS and KEEPALIVE in every state. */
enum { RQ_ACK, RQ_START, RQ_STOP, RQ_COMPLETE, RQ_ABORT, RQ_STATUS, RQ_KEEPALIVE, RQ_N };

static int request(struct ql_ctl_client *cl, int rq)
{
	struct ql_conn_params mine[1];
	char json[256];

	switch (rq) {
	case RQ_ACK:
		my_params(mine, 1, 0x900);
		return ql_ctl_client_ack(cl, mine, 1);
	case RQ_START:
		return ql_ctl_client_start(cl);
	case RQ_STOP:
		return ql_ctl_client_stop(cl);
	case RQ_COMPLETE:
		return ql_ctl_client_complete(cl);
	case RQ_ABORT:
		return ql_ctl_client_abort(cl);
	case RQ_STATUS:
		return ql_ctl_client_status(cl, json, sizeof(json));
	default:
		return ql_ctl_client_keepalive(cl);
	}
}

static void test_state_table(void **state)
{
	static const char *const names[] = { "OFFERED", "CONNECTED", "RUNNING", "STOPPED" };
	/* [state][request]: 1 valid, 0 bad_state */
	static const int valid[4][RQ_N] = {
		/* ACK START STOP COMPLETE ABORT STATUS KEEPALIVE */
		{ 1, 0, 0, 0, 1, 1, 1 }, /* OFFERED */
		{ 0, 1, 0, 1, 1, 1, 1 }, /* CONNECTED */
		{ 0, 0, 1, 1, 1, 1, 1 }, /* RUNNING */
		{ 0, 1, 0, 1, 1, 1, 1 }, /* STOPPED */
	};
	struct fx *f = fx_start(NULL, false, 0);

	(void)state;
	for (int s = 0; s < 4; s++)
		for (int rq = 0; rq < RQ_N; rq++) {
			struct ql_ctl_client *cl = client(f, NULL, 0, NULL, 0, 0);
			struct ql_conn_params rth[1], mine[1];
			uint64_t bad = stats(f).bad_state;
			char json[256], want[64];
			int ret;

			assert_int_equal(ql_ctl_client_discover(cl, 1, rth), 0);
			if (s >= 1) {
				my_params(mine, 1, 0x500);
				assert_int_equal(ql_ctl_client_ack(cl, mine, 1), 0);
			}
			if (s >= 2)
				assert_int_equal(ql_ctl_client_start(cl), 0);
			if (s == 3)
				assert_int_equal(ql_ctl_client_stop(cl), 0);
			ret = request(cl, rq);
			if (valid[s][rq]) {
				if (ret != 0)
					fail_msg("request %d in %s: %d (%s)", rq, names[s], ret,
						 ql_error_detail());
				assert_int_equal(stats(f).bad_state, bad);
			} else {
				if (ret != -EPROTO)
					fail_msg("request %d in %s: %d, not bad_state", rq,
						 names[s], ret);
				assert_non_null(strstr(ql_error_detail(), "bad_state"));
				assert_int_equal(stats(f).bad_state, bad + 1);
				/* and nothing moved (OFFERED has no status callback:
				 * the ACK only it takes shows it) */
				if (s == 0) {
					assert_int_equal(request(cl, RQ_ACK), 0);
				} else {
					assert_int_equal(
						ql_ctl_client_status(cl, json, sizeof(json)), 0);
					snprintf(want, sizeof(want), "\"state\":\"%s\"", names[s]);
					assert_non_null(strstr(json, want));
				}
			}
			if (rq != RQ_ABORT && rq != RQ_COMPLETE)
				ql_ctl_client_abort(cl);
			else if (!valid[s][rq])
				assert_int_equal(ql_ctl_client_abort(cl), 0);
			ql_ctl_client_destroy(cl);
		}
	assert_int_equal(stats(f).sessions_active, 0);
	fx_stop(f);
}

static void test_refused_accept_and_shutdown_notice(void **state)
{
	struct fx *f = fx_start(NULL, false, 0);
	struct ql_ctl_client *a = client(f, NULL, 0, NULL, 0, 0);
	struct ql_ctl_client *b = client(f, NULL, 0, NULL, 0, 0);
	struct ql_conn_params rth, mine;

	assert_int_equal(ql_ctl_client_discover(a, 1, &rth), 0);
	my_params(&mine, 1, 0);
	mine.qpn = 0xdead;
	assert_int_equal(ql_ctl_client_ack(a, &mine, 1), -ECONNREFUSED);
	assert_non_null(strstr(ql_error_detail(), "0xdead is not welcome"));
	assert_int_equal(CNT(f->aborts), 1); /* the offer was released */

	connect_client(b, 1);
	assert_int_equal(ql_ctl_client_start(b), 0);
	__atomic_store_n(&f->stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(f->thread, NULL);
	ql_ctl_server_destroy(f->srv);
	/* The server said goodbye: the client learns it at its next keepalive. */
	{
		uint64_t t0 = now_ms();
		int ret = 0;

		while (now_ms() - t0 < 2000 && (ret = ql_ctl_client_keepalive(b)) == 0)
			usleep(10000);
		assert_int_equal(ret, -ECONNRESET);
		assert_non_null(strstr(ql_error_detail(), "server shutdown"));
	}
	assert_int_equal(CNT(f->aborts), 2);
	ql_ctl_client_destroy(a);
	ql_ctl_client_destroy(b);
	free(f);
}

static void test_duplicates_and_reordering(void **state)
{
	struct fx *f = fx_start(NULL, false, 0);
	int fd = raw_socket(f, "127.0.0.1");
	uint8_t d1[QL_CTL_MAX_DGRAM], d2[QL_CTL_MAX_DGRAM], d3[QL_CTL_MAX_DGRAM];
	uint8_t r1[2048], r2[2048];
	struct ql_ctl_msg m = req(QL_CTL_DISCOVER, 0x1111, 1), rep;
	size_t n1 = raw_discover(fd, &m, false, d1), n2, n3;
	int l1, l2;

	/* DISCOVER twice: the same CONNECTION_PARAMS twice, one offer. */
	raw_send(fd, d1, n1);
	raw_send(fd, d1, n1);
	l1 = raw_recv(fd, r1, sizeof(r1), 2000);
	l2 = raw_recv(fd, r2, sizeof(r2), 2000);
	assert_true(l1 > 0);
	assert_int_equal(l1, l2);
	assert_memory_equal(r1, r2, (size_t)l1);
	assert_int_equal(CNT(f->offers), 1);

	/* ACK(2), START(3) arrive, then late copies of ACK(2), START(3), DISCOVER(1). */
	m = req(QL_CTL_ACK, 0x1111, 2);
	n2 = fmt(&m, false, d2);
	m = req(QL_CTL_START, 0x1111, 3);
	n3 = fmt(&m, false, d3);
	raw_send(fd, d2, n2);
	expect_reply(fd, false, &rep, QL_CTL_OK);
	assert_int_equal(rep.re, QL_CTL_ACK);
	raw_send(fd, d3, n3);
	expect_reply(fd, false, &rep, QL_CTL_OK);
	assert_int_equal(rep.state, QL_CTL_S_RUNNING);
	raw_send(fd, d2, n2);
	expect_silence(fd, 100); /* older than the last: dropped */
	raw_send(fd, d3, n3);
	expect_reply(fd, false, &rep, QL_CTL_OK); /* same as the last: answered again */
	assert_int_equal(rep.seq, 3);
	raw_send(fd, d1, n1);
	expect_silence(fd, 100);
	assert_int_equal(CNT(f->offers), 1);
	assert_int_equal(CNT(f->accepts), 1);
	assert_int_equal(CNT(f->starts), 1);
	assert_int_equal(stats(f).duplicates, 2);
	assert_int_equal(stats(f).replayed, 2);

	/* A gap in seq is fine (lost keepalives): STOP(7). */
	m = req(QL_CTL_STOP, 0x1111, 7);
	n1 = fmt(&m, false, d1);
	raw_send(fd, d1, n1);
	expect_reply(fd, false, &rep, QL_CTL_OK);
	assert_int_equal(CNT(f->stops), 1);
	close(fd);
	fx_stop(f);
}

/* A relay between client and server that drops the first datagrams each way. */
struct proxy {
	int fd_client; /* the client talks to this one */
	int fd_server; /* connected to the server */
	uint16_t port;
	int drop_up, drop_down;
	int stop;
	pthread_t thread;
};

static void *proxy_main(void *arg)
{
	struct proxy *p = arg;
	struct sockaddr_in peer;
	socklen_t plen = 0;
	uint8_t buf[2048];

	while (!CNT(p->stop)) {
		struct pollfd pf[2] = { { .fd = p->fd_client, .events = POLLIN },
					{ .fd = p->fd_server, .events = POLLIN } };
		ssize_t n;

		if (poll(pf, 2, 10) <= 0)
			continue;
		if (pf[0].revents & POLLIN) {
			plen = sizeof(peer);
			n = recvfrom(p->fd_client, buf, sizeof(buf), 0, (struct sockaddr *)&peer,
				     &plen);
			if (n > 0 && p->drop_up-- <= 0)
				send(p->fd_server, buf, (size_t)n, 0);
		}
		if (pf[1].revents & POLLIN) {
			n = recv(p->fd_server, buf, sizeof(buf), 0);
			if (n > 0 && plen && p->drop_down-- <= 0)
				sendto(p->fd_client, buf, (size_t)n, 0, (struct sockaddr *)&peer,
				       plen);
		}
	}
	return NULL;
}

static void test_loss(void **state)
{
	struct fx *f = fx_start(NULL, false, 0);
	struct proxy p = { .drop_up = 3, .drop_down = 2 };
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	char addr[32];
	struct ql_ctl_client *cl;
	struct ql_ctl_client_config cfg = { .timeout_ms = 30, .retries = 8 };

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	p.fd_client = socket(AF_INET, SOCK_DGRAM, 0);
	assert_int_equal(bind(p.fd_client, (struct sockaddr *)&a, sizeof(a)), 0);
	getsockname(p.fd_client, (struct sockaddr *)&a, &alen);
	p.port = ntohs(a.sin_port);
	p.fd_server = raw_socket(f, "127.0.0.1");
	assert_int_equal(pthread_create(&p.thread, NULL, proxy_main, &p), 0);

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", p.port);
	assert_int_equal(ql_ctl_client_create(addr, NULL, 0, &cfg, &cl), 0);
	connect_client(cl, 1);
	assert_int_equal(ql_ctl_client_start(cl), 0);
	/* Each retransmission reached the server at most once per side effect. */
	assert_int_equal(CNT(f->offers), 1);
	assert_int_equal(CNT(f->accepts), 1);
	assert_int_equal(CNT(f->starts), 1);
	/* the replies it had to send twice: cached ones, and RETRYs (stateless, sent anew) */
	assert_true(stats(f).duplicates + stats(f).retries >= 3);

	/* Beyond the retries: -ETIMEDOUT with a sentence. */
	p.drop_up = 1000;
	assert_int_equal(ql_ctl_client_stop(cl), -ETIMEDOUT);
	assert_non_null(strstr(ql_error_detail(), "no reply to STOP"));
	__atomic_store_n(&p.stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(p.thread, NULL);
	close(p.fd_client);
	close(p.fd_server);
	ql_ctl_client_destroy(cl);
	fx_stop(f);
}

static void test_session_lost(void **state)
{
	struct fx *f = fx_start(NULL, false, 300);
	struct ql_ctl_client *quiet = client(f, NULL, 0, NULL, 0, 0);
	struct ql_ctl_client *alive = client(f, NULL, 0, NULL, 0, 0);
	uint64_t t0;

	connect_client(quiet, 1);
	connect_client(alive, 1);
	assert_int_equal(ql_ctl_client_start(alive), 0);
	t0 = now_ms();
	while (now_ms() - t0 < 3000 && CNT(f->losts) == 0) {
		assert_int_equal(ql_ctl_client_keepalive(alive), 0);
		usleep(50000);
	}
	assert_int_equal(CNT(f->losts), 1);
	assert_true(now_ms() - t0 >= 250);
	/* The live one keeps going past several timeouts. */
	t0 = now_ms();
	while (now_ms() - t0 < 800) {
		assert_int_equal(ql_ctl_client_keepalive(alive), 0);
		usleep(50000);
	}
	assert_int_equal(CNT(f->losts), 1);
	assert_int_equal(stats(f).sessions_lost, 1);
	assert_int_equal(stats(f).sessions_active, 1);
	assert_int_equal(ql_ctl_client_stop(alive), 0);
	/* The lost one is forgotten: its next request says so. */
	assert_int_equal(ql_ctl_client_start(quiet), -ENOTCONN);
	ql_ctl_client_destroy(quiet);
	ql_ctl_client_destroy(alive);
	fx_stop(f);
}

static void test_several_sessions(void **state)
{
	struct fx *f = fx_start(NULL, false, 0);
	struct ql_ctl_client *cl[4];
	char json[256];

	for (int i = 0; i < 4; i++) {
		cl[i] = client(f, NULL, 0, NULL, 0, 0);
		connect_client(cl[i], (uint32_t)(i % 3) + 1);
	}
	for (int i = 0; i < 4; i++)
		assert_int_equal(ql_ctl_client_start(cl[i]), 0);
	assert_int_equal(stats(f).sessions_active, 4);
	assert_int_equal(stats(f).sessions_total, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(ql_ctl_client_status(cl[i], json, sizeof(json)), 0);
		assert_int_equal(i % 2 ? ql_ctl_client_complete(cl[i]) : ql_ctl_client_abort(cl[i]),
				 0);
	}
	assert_int_equal(CNT(f->completes), 2);
	assert_int_equal(CNT(f->aborts), 2);
	assert_int_equal(stats(f).sessions_active, 0);
	for (int i = 0; i < 4; i++)
		ql_ctl_client_destroy(cl[i]);
	fx_stop(f);
}

static void test_allowlist(void **state)
{
	static const char *const allow[] = { "127.0.0.2/32", NULL };
	struct fx *f = fx_start(allow, false, 0);
	struct ql_ctl_client *bad = client(f, NULL, 0, "127.0.0.1", 20, 2);
	struct ql_ctl_client *good = client(f, NULL, 0, "127.0.0.2", 0, 0);
	struct ql_conn_params rth;

	assert_int_equal(ql_ctl_client_discover(bad, 1, &rth), -ETIMEDOUT);
	assert_int_equal(stats(f).not_allowed, 3);
	assert_int_equal(stats(f).replied, 0);
	assert_int_equal(CNT(f->offers), 0);
	connect_client(good, 1);
	assert_int_equal(CNT(f->offers), 1);
	ql_ctl_client_destroy(bad);
	ql_ctl_client_destroy(good);
	fx_stop(f);

	/* A malformed allowlist is refused at create, with the entry named. */
	{
		static const char *const wrong[] = { "127.0.0.0/33", NULL };
		struct ql_ctl_server_config cfg = { .bind_addr = "127.0.0.1", .allow = wrong };
		struct ql_ctl_server *srv;

		assert_int_equal(ql_ctl_server_create(&cfg, &ops, NULL, &srv), -EINVAL);
		assert_non_null(strstr(ql_error_detail(), "127.0.0.0/33"));
	}
}

static void test_authentication(void **state)
{
	struct fx *f = fx_start(NULL, true, 0);
	struct ql_ctl_client *good = client(f, secret, SECRET_LEN, NULL, 0, 0);
	struct ql_ctl_client *none = client(f, NULL, 0, NULL, 0, 0);
	struct ql_ctl_client *wrong = client(f, (const uint8_t *)"wrong", 5, NULL, 20, 1);
	struct ql_conn_params rth;
	uint8_t d[QL_CTL_MAX_DGRAM], k[QL_CTL_MAX_DGRAM];
	struct ql_ctl_msg m, rep;
	size_t n, kn;
	char json[256];
	int fd;

	connect_client(good, 1);
	assert_int_equal(ql_ctl_client_start(good), 0);

	/* No MAC: answered ERROR bad_mac; the client says EACCES. */
	assert_int_equal(ql_ctl_client_discover(none, 1, &rth), -EACCES);
	assert_non_null(strstr(ql_error_detail(), "bad_mac"));
	/* A wrong secret: the server's ERROR does not verify either; a timeout that says why. */
	assert_int_equal(ql_ctl_client_discover(wrong, 1, &rth), -ETIMEDOUT);
	assert_non_null(strstr(ql_error_detail(), "authentication"));
	assert_int_equal(CNT(f->offers), 1);
	assert_int_equal(stats(f).bad_mac, 1 + 2);

	/* Replays of authenticated datagrams: an old seq is dropped and counted. */
	fd = raw_socket(f, "127.0.0.1");
	m = req(QL_CTL_DISCOVER, 0x2222, 1);
	n = raw_discover(fd, &m, true, d);
	raw_send(fd, d, n);
	expect_reply(fd, true, &rep, QL_CTL_CONNECTION_PARAMS);
	m = req(QL_CTL_KEEPALIVE, 0x2222, 2);
	kn = fmt(&m, true, k);
	raw_send(fd, k, kn);
	expect_reply(fd, true, &rep, QL_CTL_OK);
	m = req(QL_CTL_KEEPALIVE, 0x2222, 3);
	n = fmt(&m, true, d);
	raw_send(fd, d, n);
	expect_reply(fd, true, &rep, QL_CTL_OK);
	raw_send(fd, k, kn);
	expect_silence(fd, 100);
	assert_int_equal(stats(f).replayed, 1);
	/* Tampering: same MAC, a changed seq. */
	memcpy(k, d, n);
	{
		char *p = strstr((char *)k, "\"seq\":3");

		assert_non_null(p);
		p[6] = '4';
	}
	raw_send(fd, k, n);
	{
		uint8_t buf[2048];
		int l = raw_recv(fd, buf, sizeof(buf), 2000);

		assert_true(l > 0);
		assert_int_equal(ql_ctl_parse(buf, (size_t)l, secret, SECRET_LEN, &rep), 0);
		assert_int_equal(rep.type, QL_CTL_ERROR);
		assert_string_equal(rep.code, "bad_mac");
	}
	assert_int_equal(stats(f).bad_mac, 4);
	close(fd);

	/* The authenticated QCS was served throughout. */
	assert_int_equal(ql_ctl_client_status(good, json, sizeof(json)), 0);
	assert_int_equal(CNT(f->offers), 2);
	ql_ctl_client_destroy(good);
	ql_ctl_client_destroy(none);
	ql_ctl_client_destroy(wrong);
	fx_stop(f);
}

static void test_bad_datagrams(void **state)
{
	struct fx *f = fx_start(NULL, false, 0);
	struct ql_ctl_client *cl = client(f, NULL, 0, NULL, 0, 0);
	int fd = raw_socket(f, "127.0.0.1");
	static uint8_t big[4000];
	char json[256];
	struct ql_ctl_stats st;
	static const struct {
		const char *text;
		const char *code; /* NULL: dropped unanswered */
	} cases[] = {
		{ "not json at all", "malformed" },
		{ "{\"v\":2,\"type\":\"DISCOVER\",\"session\":\"00000000000000aa\",\"se",
		  "malformed" },
		{ "[1,2,3]", "malformed" },
		{ "null", "malformed" },
		{ "{}", "malformed" },
		{ "{\"v\":\"1\",\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":1}", "malformed" },
		{ "{\"v\":2,\"type\":7,\"session\":\"aa\",\"seq\":1}", "malformed" },
		{ "{\"v\":2,\"type\":\"DISCOVER\",\"session\":\"zz\",\"seq\":1}", "malformed" },
		{ "{\"v\":2,\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":-1}", "malformed" },
		{ "{\"v\":2,\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":1.5}", "malformed" },
		{ "{\"v\":2,\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":1,\"channels\":99}",
		  "malformed" },
		{ "{\"v\":2,\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":1,\"name\":5}",
		  "malformed" },
		{ "{\"v\":2,\"v\":2,\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":1}",
		  "malformed" },
		{ "{\"v\":2,\"type\":\"ACK\",\"session\":\"aa\",\"seq\":2,\"channels\":[{\"qpn\":1}]}",
		  "malformed" },
		{ "{\"v\":3,\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":1}", "bad_version" },
		{ "{\"v\":2,\"type\":\"EXPLODE\",\"session\":\"aa\",\"seq\":1}", "bad_type" },
		{ "{\"v\":2,\"type\":\"OK\",\"session\":\"aa\",\"seq\":1,\"re\":\"ACK\","
		  "\"state\":\"RUNNING\"}",
		  "bad_type" },
		{ "{\"v\":2,\"type\":\"START\",\"session\":\"00000000deadbeef\",\"seq\":5}",
		  "unknown_session" },
	};

	connect_client(cl, 1);
	assert_int_equal(ql_ctl_client_start(cl), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* Padded with blanks after the JSON: the server answers a source without a
		 * session only with what is no larger than the datagram (see
		 * test_no_amplification for the short ones). */
		char padded[300];

		memset(padded, ' ', sizeof(padded));
		memcpy(padded, cases[i].text, strlen(cases[i].text));
		raw_send(fd, padded, sizeof(padded));
		expect_error(fd, cases[i].code);
		/* The connected QCS is still served after every bad datagram. */
		assert_int_equal(ql_ctl_client_status(cl, json, sizeof(json)), 0);
		assert_non_null(strstr(json, "RUNNING"));
	}
	/* Oversized, within and beyond the receive buffer; binary garbage. */
	memset(big, '{', sizeof(big));
	raw_send(fd, big, 1401);
	expect_error(fd, "too_big");
	raw_send(fd, big, sizeof(big));
	expect_error(fd, "too_big");
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 131 + 7);
	raw_send(fd, big, 700);
	expect_error(fd, "malformed");
	raw_send(fd, "", 0); /* shorter than any answer: dropped unanswered */
	expect_silence(fd, 100);
	/* A flood: the kernel may drop some (the socket buffer is finite); the server handles
	 * the rest, the QCS is still served, and the log lines are rate-limited. */
	for (int i = 0; i < 500; i++)
		raw_send(fd, "garbage", 7);
	assert_int_equal(ql_ctl_client_status(cl, json, sizeof(json)), 0);
	{
		uint64_t t0 = now_ms(), last = 0;

		/* until the count stops moving (bounded) */
		while (now_ms() - t0 < 2000 && stats(f).received != last) {
			last = stats(f).received;
			usleep(50000);
		}
	}
	st = stats(f);
	assert_true(st.malformed >= 15 + 50);
	assert_int_equal(st.rejected, st.malformed + st.too_big + st.bad_version + st.bad_type +
					      st.unknown_session);
	assert_int_equal(st.too_big, 2);
	assert_int_equal(st.bad_version, 1);
	assert_int_equal(st.bad_type, 2);
	assert_int_equal(st.unknown_session, 1);
	assert_int_equal(CNT(f->offers), 1);
	assert_int_equal(CNT(f->starts), 1);
	assert_int_equal(ql_ctl_client_stop(cl), 0);
	close(fd);
	ql_ctl_client_destroy(cl);
	fx_stop(f);
}

/* ---- attacks (issue 9): each performed, each repelled ---------------------- */

/* A second socket on the control port, even one asking for SO_REUSEADDR and
 * SO_REUSEPORT, cannot bind it; nor can the server bind a port already taken. */
static void test_attack_port_sharing(void **state)
{
	struct fx *f = fx_start(NULL, false, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct ql_ctl_server_config cfg = { .bind_addr = "127.0.0.1" };
	struct ql_ctl_server *srv;
	char want[64];
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	a.sin_port = htons(ql_ctl_server_port(f->srv));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), -1);
	assert_int_equal(errno, EADDRINUSE);
	/* Another uid (when the test runs as root: nobody) fares no better. */
	if (geteuid() == 0) {
		pid_t pid = fork();
		int status = 0;

		assert_true(pid >= 0);
		if (pid == 0) {
			int o = socket(AF_INET, SOCK_DGRAM, 0);

			if (setgid(65534) || setuid(65534) || o < 0)
				_exit(77);
			setsockopt(o, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			setsockopt(o, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
			_exit(bind(o, (struct sockaddr *)&a, sizeof(a)) == -1 &&
					      errno == EADDRINUSE ?
				      0 :
				      1);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		if (WEXITSTATUS(status) != 77)
			assert_int_equal(WEXITSTATUS(status), 0);
	}
	/* A second server on the same port: refused, with a sentence that says so. */
	cfg.port = ql_ctl_server_port(f->srv);
	assert_int_equal(ql_ctl_server_create(&cfg, &ops, NULL, &srv), -EADDRINUSE);
	snprintf(want, sizeof(want), "control port %u already in use", cfg.port);
	assert_non_null(strstr(ql_error_detail(), want));
	close(fd);
	fx_stop(f);
	/* The other way round: a squatter bound first with both options set. */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	a.sin_port = 0;
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	{
		socklen_t l = sizeof(a);

		getsockname(fd, (struct sockaddr *)&a, &l);
	}
	cfg.port = ntohs(a.sin_port);
	assert_int_equal(ql_ctl_server_create(&cfg, &ops, NULL, &srv), -EADDRINUSE);
	close(fd);
}

/* DISCOVERs from spoofed sources (no cookie, many ports, 4 channels each)
 * create nothing; each is answered by a RETRY no larger than itself. */
static void test_attack_spoofed_discover(void **state)
{
	struct fx *f = fx_start(NULL, false, 0);
	struct ql_ctl_client *cl = client(f, NULL, 0, NULL, 0, 0);
	uint8_t d[QL_CTL_MAX_DGRAM], r[2048];
	struct ql_ctl_msg m, rep;

	for (int i = 0; i < 40; i++) {
		int fd = raw_socket(f, "127.0.0.1");
		size_t n;
		int l;

		m = req(QL_CTL_DISCOVER, 0x7000 + (uint64_t)i, 1);
		m.nchannels = 4;
		n = fmt(&m, false, d);
		assert_true(n >= QL_CTL_DISCOVER_MIN);
		raw_send(fd, d, n);
		l = raw_recv(fd, r, sizeof(r), 2000);
		assert_true(l > 0 && (size_t)l <= n);
		assert_int_equal(ql_ctl_parse(r, (size_t)l, NULL, 0, &rep), 0);
		assert_int_equal(rep.type, QL_CTL_RETRY);
		/* A forged cookie earns only another RETRY. */
		memset(m.cookie, 'a', QL_CTL_COOKIE_HEX);
		n = fmt(&m, false, d);
		raw_send(fd, d, n);
		expect_reply(fd, false, &rep, QL_CTL_RETRY);
		/* A cookie is bound to the address and port it was sent to. */
		if (i) {
			memcpy(m.cookie, rep.cookie, sizeof(m.cookie));
			n = fmt(&m, false, d);
			close(fd);
			fd = raw_socket(f, "127.0.0.1");
			raw_send(fd, d, n);
			expect_reply(fd, false, &rep, QL_CTL_RETRY);
		}
		close(fd);
	}
	assert_int_equal(CNT(f->offers), 0);
	assert_int_equal(stats(f).sessions_active, 0);
	assert_true(stats(f).bad_cookie >= 40 + 39);
	/* An unpadded DISCOVER: not one byte more comes back than was sent. */
	{
		int fd = raw_socket(f, "127.0.0.1");
		const char *tiny = "{\"v\":2,\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":1}";
		int l;

		raw_send(fd, tiny, strlen(tiny));
		l = raw_recv(fd, r, sizeof(r), 300);
		assert_true(l < 0 || (size_t)l <= strlen(tiny));
		close(fd);
	}
	/* A real QCS does the round trip without noticing. */
	connect_client(cl, 1);
	assert_int_equal(CNT(f->offers), 1);
	ql_ctl_client_destroy(cl);
	fx_stop(f);
}

/* Short garbage, and well-formed requests for unknown sessions: no answer is
 * ever larger than the datagram that provoked it. */
static void test_attack_no_amplification(void **state)
{
	struct fx *f = fx_start(NULL, true, 0);
	int fd = raw_socket(f, "127.0.0.1");
	static const char *const dgrams[] = {
		"x",
		"{",
		"{}",
		"{\"v\":2}",
		"{\"v\":3,\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":1}",
		"{\"v\":2,\"type\":\"START\",\"session\":\"aa\",\"seq\":1}",
		"{\"v\":2,\"type\":\"STATUS\",\"session\":\"00000000000000aa\",\"seq\":9}",
	};
	uint8_t r[2048];

	for (size_t i = 0; i < sizeof(dgrams) / sizeof(dgrams[0]); i++) {
		size_t n = strlen(dgrams[i]);
		int l;

		raw_send(fd, dgrams[i], n);
		l = raw_recv(fd, r, sizeof(r), 150);
		if (l >= 0 && (size_t)l > n)
			fail_msg("%zu-byte datagram answered with %d bytes", n, l);
	}
	assert_true(stats(f).unanswered >= 5);
	close(fd);
	fx_stop(f);
}

/* One source holding every session and channel (real address, cookies,
 * keepalives) cannot lock others out: per-source and channel limits. */
static void test_attack_session_exhaustion(void **state)
{
	struct ql_ctl_server_config cfg = {
		.bind_addr = "127.0.0.1",
		.max_sessions = 8,
		.max_channels = 18,
		.max_sessions_per_source = 4,
		.session_timeout_ms = 5000,
	};
	struct fx *f = fx_start_cfg(&cfg);
	struct ql_ctl_client *hog[5], *other, *big;
	struct ql_conn_params rth[QL_CTL_MAX_CHANNELS];

	for (int i = 0; i < 4; i++) {
		hog[i] = client(f, NULL, 0, "127.0.0.1", 0, 0);
		assert_int_equal(ql_ctl_client_discover(hog[i], 4, rth), 0);
		assert_int_equal(ql_ctl_client_keepalive(hog[i]), 0);
	}
	hog[4] = client(f, NULL, 0, "127.0.0.1", 0, 0);
	assert_int_equal(ql_ctl_client_discover(hog[4], 1, rth), -EBUSY);
	assert_non_null(strstr(ql_error_detail(), "too many sessions from this address"));
	assert_int_equal(stats(f).channels_active, 16);
	/* Another source asking for more channels than are left: busy ... */
	big = client(f, NULL, 0, "127.0.0.3", 0, 0);
	assert_int_equal(ql_ctl_client_discover(big, 4, rth), -EBUSY);
	assert_non_null(strstr(ql_error_detail(), "no free channel"));
	/* ... and one asking for what is left is served. */
	other = client(f, NULL, 0, "127.0.0.2", 0, 0);
	connect_client(other, 2);
	assert_int_equal(ql_ctl_client_start(other), 0);
	/* An ended session's slot is free at once, not a timeout later. */
	assert_int_equal(ql_ctl_client_abort(hog[0]), 0);
	assert_int_equal(ql_ctl_client_discover(hog[4], 1, rth), 0);
	/* The ended session is still remembered (its state, not "unknown"). */
	assert_int_equal(ql_ctl_client_abort(hog[0]), -EPROTO);
	assert_non_null(strstr(ql_error_detail(), "state ABORTED"));
	for (int i = 0; i < 5; i++)
		ql_ctl_client_destroy(hog[i]);
	ql_ctl_client_destroy(big);
	ql_ctl_client_destroy(other);
	fx_stop(f);
}

/* An offer that is never taken up (no ACK) is released after the session
 * timeout even while keepalives keep coming. */
static void test_attack_offer_held_by_keepalives(void **state)
{
	struct fx *f = fx_start(NULL, false, 300);
	struct ql_ctl_client *cl = client(f, NULL, 0, NULL, 0, 0);
	struct ql_conn_params rth[QL_CTL_MAX_CHANNELS];
	uint64_t t0;

	assert_int_equal(ql_ctl_client_discover(cl, 4, rth), 0);
	t0 = now_ms();
	while (now_ms() - t0 < 900 && CNT(f->losts) == 0) {
		ql_ctl_client_keepalive(cl);
		usleep(50000);
	}
	assert_int_equal(CNT(f->losts), 1);
	assert_int_equal(stats(f).channels_active, 0);
	ql_ctl_client_destroy(cl);
	fx_stop(f);
}

/* With a secret: a DISCOVER recorded and replayed (after its session ended,
 * or was forgotten) opens nothing; a replayed ACK connects nothing. */
static void test_attack_replay(void **state)
{
	struct fx *f = fx_start(NULL, true, 300);
	int fd = raw_socket(f, "127.0.0.1");
	uint8_t disc[QL_CTL_MAX_DGRAM], ack[QL_CTL_MAX_DGRAM], d[QL_CTL_MAX_DGRAM];
	struct ql_ctl_msg m, rep;
	size_t dn, an, n;
	uint64_t t0;

	m = req(QL_CTL_DISCOVER, 0x3333, 1);
	dn = raw_discover(fd, &m, true, disc);
	raw_send(fd, disc, dn);
	expect_reply(fd, true, &rep, QL_CTL_CONNECTION_PARAMS);
	m = req(QL_CTL_ACK, 0x3333, 2);
	an = fmt(&m, true, ack);
	raw_send(fd, ack, an);
	expect_reply(fd, true, &rep, QL_CTL_OK);
	m = req(QL_CTL_ABORT, 0x3333, 3);
	n = fmt(&m, true, d);
	raw_send(fd, d, n);
	expect_reply(fd, true, &rep, QL_CTL_OK);
	/* The slot is free now; a retransmitted ABORT still gets its OK, byte for byte. */
	raw_send(fd, d, n);
	expect_reply(fd, true, &rep, QL_CTL_OK);
	assert_int_equal(rep.re, QL_CTL_ABORT);
	/* Ended: the recorded DISCOVER and ACK are replays. */
	raw_send(fd, disc, dn);
	expect_silence(fd, 100);
	raw_send(fd, ack, an);
	expect_silence(fd, 100);
	assert_int_equal(CNT(f->offers), 1);
	assert_int_equal(CNT(f->accepts), 1);
	/* A second session goes silent and is forgotten (LOST); its DISCOVER replayed
	 * within the cookie's lifetime still opens nothing. */
	m = req(QL_CTL_DISCOVER, 0x4444, 1);
	dn = raw_discover(fd, &m, true, disc);
	raw_send(fd, disc, dn);
	expect_reply(fd, true, &rep, QL_CTL_CONNECTION_PARAMS);
	t0 = now_ms();
	while (now_ms() - t0 < 2000 && CNT(f->losts) == 0)
		usleep(20000);
	assert_int_equal(CNT(f->losts), 1);
	raw_send(fd, disc, dn);
	expect_silence(fd, 100);
	assert_int_equal(CNT(f->offers), 2);
	assert_true(stats(f).replayed >= 3);
	close(fd);
	fx_stop(f);
}

/* The MAC is lowercase hex, compared as text: the same MAC in uppercase is
 * a wrong MAC. */
static void test_attack_mac_case(void **state)
{
	struct ql_ctl_msg m = req(QL_CTL_KEEPALIVE, 0x5555, 1), out;
	uint8_t d[QL_CTL_MAX_DGRAM];
	size_t n = fmt(&m, true, d), i;

	assert_int_equal(ql_ctl_parse(d, n, secret, SECRET_LEN, &out), 0);
	for (i = n - QL_CTL_MAC_HEX; i < n; i++)
		if (d[i] >= 'a' && d[i] <= 'f')
			break;
	assert_true(i < n);
	d[i] = (uint8_t)(d[i] - 'a' + 'A');
	assert_int_equal(ql_ctl_parse(d, n, secret, SECRET_LEN, &out), -EACCES);
}

/* An ACK naming the RTH's own QP (self-connect), or a QP it offered in
 * another session, is refused and connects nothing. */
static void test_attack_self_connect(void **state)
{
	struct fx *f = fx_start(NULL, false, 0);
	struct ql_ctl_client *a = client(f, NULL, 0, NULL, 0, 0);
	struct ql_ctl_client *b = client(f, NULL, 0, NULL, 0, 0);
	struct ql_conn_params rth[QL_CTL_MAX_CHANNELS], other[QL_CTL_MAX_CHANNELS];

	assert_int_equal(ql_ctl_client_discover(a, 1, rth), 0);
	assert_int_equal(ql_ctl_client_ack(a, rth, 1), -ECONNREFUSED);
	assert_non_null(strstr(ql_error_detail(), "endpoint of this RTH"));
	assert_int_equal(stats(f).self_connect, 1);
	/* The other session's endpoint: b learns it from a's offer (same RTH). */
	assert_int_equal(ql_ctl_client_discover(a, 2, other), 0);
	assert_int_equal(ql_ctl_client_discover(b, 1, rth), 0);
	assert_int_equal(ql_ctl_client_ack(b, &other[1], 1), -ECONNREFUSED);
	assert_int_equal(CNT(f->accepts), 0);
	assert_int_equal(stats(f).self_connect, 2);
	assert_int_equal(stats(f).sessions_active, 1);
	ql_ctl_client_destroy(a);
	ql_ctl_client_destroy(b);
	fx_stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_format_parse),
		cmocka_unit_test(test_handshake),
		cmocka_unit_test(test_state_table),
		cmocka_unit_test(test_refused_accept_and_shutdown_notice),
		cmocka_unit_test(test_duplicates_and_reordering),
		cmocka_unit_test(test_loss),
		cmocka_unit_test(test_session_lost),
		cmocka_unit_test(test_several_sessions),
		cmocka_unit_test(test_allowlist),
		cmocka_unit_test(test_authentication),
		cmocka_unit_test(test_bad_datagrams),
		cmocka_unit_test(test_attack_port_sharing),
		cmocka_unit_test(test_attack_spoofed_discover),
		cmocka_unit_test(test_attack_no_amplification),
		cmocka_unit_test(test_attack_session_exhaustion),
		cmocka_unit_test(test_attack_offer_held_by_keepalives),
		cmocka_unit_test(test_attack_replay),
		cmocka_unit_test(test_attack_mac_case),
		cmocka_unit_test(test_attack_self_connect),
	};

	if (!getenv("QLINK_LOG"))
		ql_log_set_level(QL_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
