/* SPDX-License-Identifier: MIT */
/*
 * The control-plane client (QCS side) against a scripted fake server: what
 * it does with every kind of answer a server, a stranger or a broken network
 * can give. Bad addresses are refused at creation; silence is -ETIMEDOUT
 * after the retries, a port that answers with ICMP port unreachable is
 * -ECONNREFUSED after three tries, and replies signed with another secret
 * say so;
 * garbage, replies to other requests and other sessions are ignored while
 * the real reply is awaited; an ERROR is mapped to its errno with the
 * server's text in the detail; a reply of the wrong type is -EPROTO; a
 * CONNECTION_PARAMS with the wrong channel count or ring protocol is
 * refused; an ABORT notice makes this and every later request -ECONNRESET;
 * a forgotten session makes KEEPALIVE -ENOTCONN; STATUS that does not fit
 * the caller's buffer is -ENOSPC.
 */
#include <arpa/inet.h>
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

#include "expect_detail.h"

#include "qlink/control.h"
#include "qlink/error.h"

static const uint8_t secret[] = "client-test-secret";
#define SECRET_LEN (sizeof(secret) - 1)

enum mode {
	M_NORMAL,	/* the right answer */
	M_SILENT,	/* no answer */
	M_NOISE_FIRST,	/* garbage, a stale seq, another session, then the answer */
	M_WRONG_MAC,	/* answers signed with another secret */
	M_ERROR_BUSY,	/* ERROR busy */
	M_WRONG_TYPE,	/* STATUS_REPLY to anything */
	M_ABORT,	/* an ABORT notice instead of an answer */
	M_PARAMS_COUNT, /* CONNECTION_PARAMS with one channel too many */
	M_PARAMS_PROTO, /* CONNECTION_PARAMS with another ring protocol */
	M_FORGOTTEN,	/* ERROR unknown_session */
};

static struct {
	int fd;
	uint16_t port;
	pthread_t thread;
	atomic_int mode;
	atomic_int stop;
	atomic_int requests;
} srv;

static void send_msg(const struct sockaddr_in *to, const struct ql_ctl_msg *m, const uint8_t *key,
		     size_t key_len)
{
	uint8_t buf[QL_CTL_MAX_DGRAM];
	int n = ql_ctl_format(m, key, key_len, buf, sizeof(buf));

	if (n > 0)
		sendto(srv.fd, buf, (size_t)n, 0, (const struct sockaddr *)to, sizeof(*to));
}

static void answer(const struct ql_ctl_msg *rq, const struct sockaddr_in *from)
{
	static struct ql_ctl_msg r;
	int mode = atomic_load(&srv.mode);

	memset(&r, 0, sizeof(r));
	r.session = rq->session;
	r.seq = rq->seq;
	switch (rq->type) {
	case QL_CTL_DISCOVER:
		r.type = QL_CTL_CONNECTION_PARAMS;
		r.nchannels = rq->nchannels + (mode == M_PARAMS_COUNT);
		r.proto = QL_CTL_PROTO + (mode == M_PARAMS_PROTO);
		for (uint32_t i = 0; i < r.nchannels && i < QL_CTL_MAX_CHANNELS; i++) {
			r.ch[i].qpn = 0x100 + i;
			r.ch[i].mtu = IBV_MTU_1024;
			r.ch[i].vaddr = 0x10000;
			r.ch[i].rkey = 7;
			r.ch[i].length = 64 + 64 * 64;
			r.ch[i].num_slots = 64;
			r.ch[i].slot_size = 64;
		}
		break;
	case QL_CTL_STATUS:
		r.type = QL_CTL_STATUS_REPLY;
		snprintf(r.status, sizeof(r.status), "{\"requests\":12,\"responses\":12}");
		break;
	default:
		r.type = QL_CTL_OK;
		r.re = rq->type;
		r.state = QL_CTL_S_RUNNING;
		break;
	}
	switch (mode) {
	case M_SILENT:
		return;
	case M_NOISE_FIRST: {
		static const char junk[] = "{\"v\":2,\"type\":\"OK\"";
		struct ql_ctl_msg other = r;

		sendto(srv.fd, junk, sizeof(junk) - 1, 0, (const struct sockaddr *)from,
		       sizeof(*from));
		other.seq = rq->seq - 1; /* a late reply to an earlier request */
		send_msg(from, &other, secret, SECRET_LEN);
		other.seq = rq->seq;
		other.session = rq->session + 1; /* someone else's session */
		send_msg(from, &other, secret, SECRET_LEN);
		break;
	}
	case M_WRONG_MAC:
		send_msg(from, &r, (const uint8_t *)"another", 7);
		return;
	case M_ERROR_BUSY:
	case M_FORGOTTEN:
		memset(&r, 0, sizeof(r));
		r.type = QL_CTL_ERROR;
		r.session = rq->session;
		r.seq = rq->seq;
		snprintf(r.code, sizeof(r.code), "%s",
			 mode == M_FORGOTTEN ? "unknown_session" : "busy");
		snprintf(r.text, sizeof(r.text), "all %d slots taken", 4);
		break;
	case M_WRONG_TYPE:
		memset(&r, 0, sizeof(r));
		r.type = QL_CTL_STATUS_REPLY;
		r.session = rq->session;
		r.seq = rq->seq;
		snprintf(r.status, sizeof(r.status), "{}");
		break;
	case M_ABORT:
		memset(&r, 0, sizeof(r));
		r.type = QL_CTL_ABORT;
		r.session = rq->session;
		r.seq = 0; /* a notice, not a reply */
		snprintf(r.text, sizeof(r.text), "operator shutdown");
		break;
	default:
		break;
	}
	send_msg(from, &r, secret, SECRET_LEN);
}

static void *server_main(void *arg)
{
	static uint8_t buf[QL_CTL_MAX_DGRAM + 64];
	static struct ql_ctl_msg rq;

	(void)arg;
	while (!atomic_load(&srv.stop)) {
		struct pollfd p = { .fd = srv.fd, .events = POLLIN };
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n;

		if (poll(&p, 1, 20) <= 0)
			continue;
		n = recvfrom(srv.fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (n <= 0 || ql_ctl_parse(buf, (size_t)n, secret, SECRET_LEN, &rq))
			continue;
		atomic_fetch_add(&srv.requests, 1);
		if (rq.type != QL_CTL_KEEPALIVE || atomic_load(&srv.mode) == M_FORGOTTEN)
			answer(&rq, &from);
	}
	return NULL;
}

static int setup(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);

	(void)state;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	srv.fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (srv.fd < 0 || bind(srv.fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(srv.fd, (struct sockaddr *)&a, &al))
		return -1;
	srv.port = ntohs(a.sin_port);
	atomic_store(&srv.mode, M_NORMAL);
	atomic_store(&srv.stop, 0);
	atomic_store(&srv.requests, 0);
	return pthread_create(&srv.thread, NULL, server_main, NULL);
}

static int teardown(void **state)
{
	(void)state;
	atomic_store(&srv.stop, 1);
	pthread_join(srv.thread, NULL);
	close(srv.fd);
	return 0;
}

static struct ql_ctl_client *client(uint32_t retries)
{
	struct ql_ctl_client_config cfg = {
		.name = "test-qcs", .bind_addr = "127.0.0.1", .timeout_ms = 30, .retries = retries
	};
	struct ql_ctl_client *cl = NULL;
	char hp[64];

	snprintf(hp, sizeof(hp), "127.0.0.1:%u", srv.port);
	assert_int_equal(ql_ctl_client_create(hp, secret, SECRET_LEN, &cfg, &cl), 0);
	return cl;
}

static void test_create_refuses(void **state)
{
	static const char *const bad[] = { "127.0.0.1", ":7700", "127.0.0.1:", "" };
	struct ql_ctl_client_config cfg = { 0 };
	struct ql_ctl_client *cl = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ql_ctl_client_create(bad[i], NULL, 0, NULL, &cl), -EINVAL);
	assert_int_equal(ql_ctl_client_create(NULL, NULL, 0, NULL, &cl), -EINVAL);
	assert_int_equal(ql_ctl_client_create("127.0.0.1:7700", NULL, 4, NULL, &cl), -EINVAL);
	assert_int_equal(ql_ctl_client_create("no-such-host.invalid:7700", NULL, 0, NULL, &cl),
			 -EHOSTUNREACH);
	expect_detail("cannot resolve 'no-such-host.invalid:7700'");
	cfg.bind_addr = "::1";
	assert_int_equal(ql_ctl_client_create("127.0.0.1:7700", NULL, 0, &cfg, &cl), -EINVAL);
	expect_detail("is not IPv4");
	cfg.bind_addr = "192.0.2.1"; /* TEST-NET-1: no local interface has it */
	assert_int_equal(ql_ctl_client_create("127.0.0.1:7700", NULL, 0, &cfg, &cl),
			 -EADDRNOTAVAIL);
	expect_detail("cannot bind 192.0.2.1");
	assert_null(cl);
	ql_ctl_client_destroy(NULL);
}

static void test_before_discover(void **state)
{
	struct ql_ctl_client *cl = client(1);
	struct ql_conn_params p[2];
	char json[8];

	(void)state;
	assert_int_equal(ql_ctl_client_session(cl), 0);
	assert_int_equal(ql_ctl_client_status(cl, json, sizeof(json)), -ENOTCONN);
	assert_int_equal(ql_ctl_client_keepalive(cl), -ENOTCONN);
	assert_int_equal(ql_ctl_client_discover(cl, 0, p), -EINVAL);
	assert_int_equal(ql_ctl_client_discover(cl, QL_CTL_MAX_CHANNELS + 1, p), -EINVAL);
	assert_int_equal(ql_ctl_client_discover(cl, 1, NULL), -EINVAL);
	assert_int_equal(atomic_load(&srv.requests), 0);
	ql_ctl_client_destroy(cl);
}

static void test_params_checked(void **state)
{
	struct ql_ctl_client *cl = client(1);
	struct ql_conn_params p[2];

	(void)state;
	atomic_store(&srv.mode, M_PARAMS_COUNT);
	assert_int_equal(ql_ctl_client_discover(cl, 1, p), -EPROTO);
	expect_detail("asked for 1 channels, offered 2");
	atomic_store(&srv.mode, M_PARAMS_PROTO);
	assert_int_equal(ql_ctl_client_discover(cl, 1, p), -EPROTONOSUPPORT);
	atomic_store(&srv.mode, M_NORMAL);
	assert_int_equal(ql_ctl_client_discover(cl, 2, p), 0);
	assert_int_not_equal(ql_ctl_client_session(cl), 0);
	assert_int_equal(p[1].qpn, 0x101);
	assert_int_equal(p[1].num_slots, 64);
	ql_ctl_client_destroy(cl);
}

static void test_silence_and_wrong_secret(void **state)
{
	struct ql_ctl_client *cl = client(2);
	struct ql_conn_params p[1];

	(void)state;
	assert_int_equal(ql_ctl_client_discover(cl, 1, p), 0);
	atomic_store(&srv.requests, 0);
	atomic_store(&srv.mode, M_SILENT);
	assert_int_equal(ql_ctl_client_start(cl), -ETIMEDOUT);
	expect_detail("after 3 tries");
	assert_int_equal(atomic_load(&srv.requests), 3); /* the first send and 2 retries */
	atomic_store(&srv.mode, M_WRONG_MAC);
	assert_int_equal(ql_ctl_client_start(cl), -ETIMEDOUT);
	expect_detail("failed authentication");
	ql_ctl_client_destroy(cl);
}

/* A port nothing listens on: the ICMP port unreachables of three tries end
 * the request with -ECONNREFUSED and the reason, well before the retries
 * run out (50 + 100 + 200 ms, not the 1.5 s of six silent tries). */
static void test_port_unreachable(void **state)
{
	struct ql_ctl_client_config cfg = { .bind_addr = "127.0.0.1",
					    .timeout_ms = 50,
					    .retries = 5 };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct ql_ctl_client *cl = NULL;
	struct ql_conn_params p[1];
	struct timespec t0, t1;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	char hp[64];
	long ms;

	(void)state;
	/* a port that was free a moment ago and is closed now */
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	close(fd);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", ntohs(a.sin_port));
	assert_int_equal(ql_ctl_client_create(hp, NULL, 0, &cfg, &cl), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(ql_ctl_client_discover(cl, 1, p), -ECONNREFUSED);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	expect_detail("port unreachable");
	expect_detail(hp);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	if (ms >= 1000)
		fail_msg("took %ld ms to give up on a closed port", ms);
	ql_ctl_client_destroy(cl);
}

static void test_noise_ignored_and_errors(void **state)
{
	struct ql_ctl_client *cl = client(3);
	struct ql_conn_params p[1];
	char json[64];

	(void)state;
	assert_int_equal(ql_ctl_client_discover(cl, 1, p), 0);
	atomic_store(&srv.mode, M_NOISE_FIRST);
	assert_int_equal(ql_ctl_client_start(cl), 0);
	assert_int_equal(ql_ctl_client_status(cl, json, sizeof(json)), 0);
	assert_string_equal(json, "{\"requests\":12,\"responses\":12}");
	atomic_store(&srv.mode, M_NORMAL);
	assert_int_equal(ql_ctl_client_status(cl, NULL, 0), 0);
	assert_int_equal(ql_ctl_client_status(cl, json, 8), -ENOSPC);
	expect_detail("status needs 31 bytes");

	atomic_store(&srv.mode, M_ERROR_BUSY);
	assert_int_equal(ql_ctl_client_stop(cl), -EBUSY);
	expect_detail("server: busy: all 4 slots taken");
	atomic_store(&srv.mode, M_WRONG_TYPE);
	assert_int_equal(ql_ctl_client_complete(cl), -EPROTO);
	expect_detail("COMPLETE answered with STATUS_REPLY");
	atomic_store(&srv.mode, M_NORMAL);
	assert_int_equal(ql_ctl_client_complete(cl), 0);
	assert_int_equal(ql_ctl_client_keepalive(cl), 0);
	ql_ctl_client_destroy(cl);
}

static void test_abort_and_forgotten(void **state)
{
	struct ql_ctl_client *cl = client(2);
	struct ql_conn_params p[1];
	int before;

	(void)state;
	assert_int_equal(ql_ctl_client_discover(cl, 1, p), 0);
	atomic_store(&srv.mode, M_ABORT);
	assert_int_equal(ql_ctl_client_start(cl), -ECONNRESET);
	expect_detail("the server aborted the session: operator shutdown");
	/* from now on nothing is sent */
	atomic_store(&srv.mode, M_NORMAL);
	before = atomic_load(&srv.requests);
	assert_int_equal(ql_ctl_client_stop(cl), -ECONNRESET);
	assert_int_equal(ql_ctl_client_keepalive(cl), -ECONNRESET);
	assert_int_equal(atomic_load(&srv.requests), before);
	/* a new DISCOVER is a new session */
	assert_int_equal(ql_ctl_client_discover(cl, 1, p), 0);
	assert_int_equal(ql_ctl_client_start(cl), 0);

	/* the server forgot the session: its answer to a KEEPALIVE says so */
	atomic_store(&srv.mode, M_FORGOTTEN);
	assert_int_equal(ql_ctl_client_keepalive(cl), 0);
	for (int i = 0; i < 100 && ql_ctl_client_keepalive(cl) != -ENOTCONN; i++)
		usleep(10000);
	assert_int_equal(ql_ctl_client_keepalive(cl), -ENOTCONN);
	expect_detail("no longer knows session");
	ql_ctl_client_destroy(cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_refuses),
		cmocka_unit_test_setup_teardown(test_before_discover, setup, teardown),
		cmocka_unit_test_setup_teardown(test_params_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_silence_and_wrong_secret, setup, teardown),
		cmocka_unit_test(test_port_unreachable),
		cmocka_unit_test_setup_teardown(test_noise_ignored_and_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_and_forgotten, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
