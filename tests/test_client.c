/* SPDX-License-Identifier: MIT */
/*
 * ql_client (qlink/client.h): one interface over the ring, hsb and udp
 * clients. Each transport against its own channel and an echo daemon:
 * requests answered in order through ql_client_send/poll/release, the
 * window, the casts between a ql_client and its transport's client, the
 * errors; and the hot path: send, poll and release allocate nothing, take
 * no lock and (ring, hsb) make no system call, (udp) none but its send and
 * recvmmsg (and the channel's recvmmsg/sendmmsg).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "echo_daemon.h"
#include "hotpath.h"
#include "qlink/client.h"
#include "qlink/error.h"

#define ARG_LEN 16u
#define SLOTS 16u
#define HP_CALLS 2000u

struct cx {
	enum ql_client_transport t;
	struct ql_device *dev;
	struct ql_channel *ch;
	struct ql_daemon *d;
	struct ql_client *cl;
	uint8_t msg[QL_RPC_HEADER_SIZE + ARG_LEN];
	uint32_t next; /* request_id of the next call */
};

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)(const void *)ss)->sin6_port);
	return ntohs(((const struct sockaddr_in *)(const void *)ss)->sin_port);
}

/* The transport's channel with an echo daemon, and a connected client. */
static int cx_open(struct cx *x, enum ql_client_transport t)
{
	struct ql_client_config cc = { .transport = t };
	struct ql_conn_params sp, cp;
	int ret = 0;

	memset(x, 0, sizeof(*x));
	x->t = t;
	if (t == QL_CLIENT_RING) {
		struct ql_verbs_channel_config vc = { .num_slots = SLOTS, .slot_size = 256 };

		ret = ql_device_open("soft://loop", &x->dev);
		if (!ret)
			ret = ql_verbs_channel_create(x->dev, &vc, &x->ch);
		if (!ret)
			ret = ql_verbs_channel_local_params(x->ch, &sp);
		cc.server = &sp;
	} else if (t == QL_CLIENT_HSB) {
		struct ql_hsb_channel_config hc = { .num_pages = SLOTS };
		struct ql_hsb_params hp;

		ret = ql_device_open("soft://loop", &x->dev);
		if (!ret)
			ret = ql_hsb_channel_create(x->dev, &hc, &x->ch);
		if (!ret)
			ret = ql_hsb_channel_local_params(x->ch, &hp);
		if (!ret)
			ql_hsb_params_to_conn(&hp, &sp);
	} else {
		struct ql_udp_channel_config uc = { .address = "127.0.0.1",
						    .num_slots = SLOTS,
						    .slot_size = 256 };
		struct sockaddr_storage ss;
		socklen_t len;

		ret = ql_udp_channel_create(&uc, &x->ch);
		if (!ret)
			ret = ql_udp_channel_local_addr(x->ch, &ss, &len);
		cc.udp = (struct ql_udp_client_config){ .host = "127.0.0.1",
							.port = ret ? 0 : port_of(&ss),
							.slot_size = 256,
							.window = SLOTS };
	}
	cc.dev = x->dev;
	if (!ret)
		ret = ql_test_echo_daemon(x->ch, &x->d);
	if (!ret)
		ret = ql_client_create(&cc, &x->cl);
	if (!ret && t != QL_CLIENT_UDP) {
		ret = ql_client_local_params(x->cl, &cp);
		if (!ret)
			ret = t == QL_CLIENT_RING ? ql_verbs_channel_connect(x->ch, &cp, NULL) :
						    ql_hsb_channel_connect(x->ch, &cp, NULL);
	}
	if (!ret)
		ret = ql_client_connect(x->cl, t == QL_CLIENT_UDP ? NULL : &sp, NULL);
	if (ret)
		print_error("cx_open(%d): %s (%s)\n", (int)t, ql_strerror(ret), ql_error_detail());
	return ret;
}

static void cx_close(struct cx *x)
{
	ql_client_destroy(x->cl);
	if (x->d)
		ql_daemon_destroy(x->d);
	if (x->ch)
		ql_channel_destroy(x->ch);
	if (x->dev)
		ql_device_close(x->dev);
}

/* Send call x->next (echo of 16 bytes that say its number). */
static int cx_send(struct cx *x)
{
	struct ql_rpc_header h = { .magic = QL_RPC_MAGIC_REQUEST,
				   .function_id = ql_rpc_fnv1a("echo"),
				   .arg_len = ARG_LEN,
				   .request_id = x->next };

	ql_rpc_header_encode(x->msg, &h);
	memset(x->msg + QL_RPC_HEADER_SIZE, (int)(x->next & 0xff), ARG_LEN);
	return ql_client_send(x->cl, x->msg, sizeof(x->msg));
}

/* The response to call `id` is r: 0, or -1. */
static int check_echo(const struct ql_ring_response *r, uint32_t id)
{
	struct ql_rpc_response rh;

	if (!r->msg || r->len < QL_RPC_RESPONSE_SIZE + ARG_LEN)
		return -1;
	ql_rpc_response_decode(r->msg, &rh);
	if (rh.magic != QL_RPC_MAGIC_RESPONSE || rh.status != 0 || rh.request_id != id ||
	    rh.result_len != ARG_LEN)
		return -1;
	for (uint32_t i = 0; i < ARG_LEN; i++)
		if (r->msg[QL_RPC_RESPONSE_SIZE + i] != (uint8_t)(id & 0xff))
			return -1;
	return 0;
}

/* Serve and poll until the oldest response arrives; check and release it. */
static int cx_take(struct cx *x, uint32_t id)
{
	struct ql_ring_response r;

	for (uint64_t i = 0; i < 50000000ull; i++) {
		int n;

		if (ql_daemon_poll(x->d) < 0)
			return -1;
		n = ql_client_poll(x->cl, &r, 1);
		if (n < 0)
			return -1;
		if (n == 1) {
			int bad = check_echo(&r, id);

			return ql_client_release(x->cl, &r) || bad ? -1 : 0;
		}
	}
	return -1;
}

/* HP_CALLS calls, one at a time: the measured loop. */
static int hot_calls(void *arg)
{
	struct cx *x = arg;

	for (uint32_t i = 0; i < HP_CALLS; i++, x->next++)
		if (cx_send(x) || cx_take(x, x->next))
			return -1;
	return 0;
}

static const enum ql_client_transport transports[] = { QL_CLIENT_RING, QL_CLIENT_HSB,
						       QL_CLIENT_UDP };

/* Calls answered in order, the window, the casts. */
static void test_roundtrip(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(transports) / sizeof(transports[0]); k++) {
		struct ql_client_stats st;
		struct cx x;
		uint32_t sent = 0;
		int ret;

		assert_int_equal(cx_open(&x, transports[k]), 0);
		assert_int_equal(ql_client_transport(x.cl), transports[k]);
		assert_true((ql_client_ring(x.cl) != NULL) == (transports[k] == QL_CLIENT_RING));
		assert_true((ql_client_hsb(x.cl) != NULL) == (transports[k] == QL_CLIENT_HSB));
		assert_true((ql_client_udp(x.cl) != NULL) == (transports[k] == QL_CLIENT_UDP));
		if (transports[k] == QL_CLIENT_RING)
			assert_ptr_equal(ql_client_from_ring(ql_client_ring(x.cl)), x.cl);
		else if (transports[k] == QL_CLIENT_HSB)
			assert_ptr_equal(ql_client_from_hsb(ql_client_hsb(x.cl)), x.cl);
		else
			assert_ptr_equal(ql_client_from_udp(ql_client_udp(x.cl)), x.cl);
		assert_true(ql_client_max_msg(x.cl) >= sizeof(x.msg));

		/* a window of calls, then -EAGAIN, then every answer in order */
		while ((ret = cx_send(&x)) == 0) {
			x.next++;
			sent++;
			assert_int_equal(ql_client_in_flight(x.cl), sent);
			assert_true(sent <= SLOTS);
		}
		assert_int_equal(ret, -EAGAIN);
		assert_int_equal(sent, SLOTS);
		for (uint32_t i = 0; i < sent; i++)
			assert_int_equal(cx_take(&x, i), 0);
		assert_int_equal(ql_client_in_flight(x.cl), 0);
		/* a message longer than the client's largest */
		{
			static uint8_t big[70000];

			assert_int_equal(ql_client_send(x.cl, big, ql_client_max_msg(x.cl) + 1),
					 -EMSGSIZE);
		}
		memset(&st, 0xff, sizeof(st));
		ql_client_stats(x.cl, &st);
		assert_int_equal(st.resent, 0);
		assert_int_equal(st.lost, 0);
		assert_int_equal(st.dup_responses, 0);
		cx_close(&x);
	}
}

static void test_wait(void **state)
{
	struct ql_ring_response r;
	struct cx x;

	(void)state;
	assert_int_equal(cx_open(&x, QL_CLIENT_RING), 0);
	assert_int_equal(ql_client_wait(x.cl, &r, 1000000), -ETIMEDOUT);
	assert_int_equal(cx_send(&x), 0);
	assert_int_equal(ql_daemon_poll(x.d), 1); /* soft://loop: served inline */
	assert_int_equal(ql_client_wait(x.cl, &r, 1000000000ull), 1);
	assert_int_equal(check_echo(&r, 0), 0);
	assert_int_equal(ql_client_release(x.cl, &r), 0);
	cx_close(&x);
}

static void test_errors(void **state)
{
	struct ql_client_config cc = { .transport = QL_CLIENT_RING };
	struct ql_conn_params p;
	struct ql_client *cl = NULL;
	struct cx x;

	(void)state;
	assert_int_equal(ql_client_create(NULL, &cl), -EINVAL);
	assert_int_equal(ql_client_create(&cc, NULL), -EINVAL);
	assert_int_equal(ql_client_create(&cc, &cl), -EINVAL); /* no device, no ring */
	cc.transport = QL_CLIENT_HSB;
	assert_int_equal(ql_client_create(&cc, &cl), -EINVAL); /* no device */
	cc.transport = (enum ql_client_transport)7;
	assert_int_equal(ql_client_create(&cc, &cl), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "unknown transport"));
	cc.transport = QL_CLIENT_UDP; /* no address */
	assert_int_equal(ql_client_create(&cc, &cl), -EINVAL);
	assert_null(cl);
	ql_client_destroy(NULL);
	assert_null(ql_client_ring(NULL));
	assert_null(ql_client_from_ring(NULL));
	assert_int_equal(ql_client_local_params(NULL, &p), -EINVAL);
	assert_int_equal(ql_client_connect(NULL, &p, NULL), -EINVAL);

	assert_int_equal(cx_open(&x, QL_CLIENT_UDP), 0);
	assert_int_equal(ql_client_local_params(x.cl, &p), -EOPNOTSUPP);
	cx_close(&x);
	assert_int_equal(cx_open(&x, QL_CLIENT_HSB), 0);
	assert_int_equal(ql_client_connect(x.cl, NULL, NULL), -EINVAL);
	memset(&p, 0, sizeof(p)); /* not hsb parameters */
	assert_int_equal(ql_client_connect(x.cl, &p, NULL), -EINVAL);
	/* ql_client_open: a step that fails leaves nothing */
	cc = (struct ql_client_config){ .transport = QL_CLIENT_HSB, .dev = x.dev };
	cl = (struct ql_client *)&cc;
	assert_int_equal(ql_client_open(&cc, &p, NULL, &cl, NULL), -EINVAL);
	assert_null(cl);
	{
		struct ql_conn_params local, hp;
		struct ql_hsb_params h;

		assert_int_equal(ql_hsb_channel_local_params(x.ch, &h), 0);
		ql_hsb_params_to_conn(&h, &hp);
		assert_int_equal(ql_client_open(&cc, &hp, NULL, &cl, &local), 0);
		assert_int_equal(ql_client_transport(cl), QL_CLIENT_HSB);
		assert_int_not_equal(local.qpn, 0);
		ql_client_destroy(cl);
	}
	cx_close(&x);
	cc = (struct ql_client_config){ .transport = QL_CLIENT_UDP,
					.udp = { .host = "127.0.0.1", .port = 9 } };
	assert_int_equal(ql_client_open(&cc, NULL, NULL, &cl, &p), -EOPNOTSUPP);
	assert_null(cl);
	assert_int_equal(ql_client_open(&cc, NULL, NULL, &cl, NULL), 0);
	assert_non_null(ql_client_udp(cl));
	ql_client_destroy(cl);
}

/* ring and hsb on soft://loop: no allocation, lock or system call. */
static void test_hotpath_verbs(void **state)
{
	(void)state;
	for (int k = 0; k < 2; k++) {
		char why[256];
		struct cx x;

		assert_int_equal(cx_open(&x, transports[k]), 0);
		assert_int_equal(hot_calls(&x), 0); /* warm: first use of every path */
		if (hp_check(hot_calls, &x, why, sizeof(why)))
			fail_msg("%s: %s", transports[k] == QL_CLIENT_RING ? "ring" : "hsb", why);
		cx_close(&x);
	}
}

/* udp: no allocation or lock; under seccomp nothing but the client's send
 * (sendto) and recvmmsg and the channel's recvmmsg and sendmmsg. */
static void test_hotpath_udp(void **state)
{
	unsigned long allocs, locks;
	struct cx x;
	pid_t pid;
	int st;

	(void)state;
	assert_int_equal(cx_open(&x, QL_CLIENT_UDP), 0);
	assert_int_equal(hot_calls(&x), 0);
	if (hp_available()) {
		hp_begin();
		assert_int_equal(hot_calls(&x), 0);
		hp_end(&allocs, &locks);
		assert_int_equal(allocs, 0);
		assert_int_equal(locks, 0);
	}
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		static const int allowed[] = { SYS_sendto, SYS_recvmmsg, SYS_sendmmsg };

		alarm(60);
		if (hp_seccomp_allow(allowed, 3))
			_exit(11);
		syscall(SYS_exit, hot_calls(&x) ? 12 : 0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		fail_msg("the child was killed by signal %d (seccomp: a system call other than "
			 "sendto/recvmmsg/sendmmsg?)",
			 WTERMSIG(st));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	cx_close(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),   cmocka_unit_test(test_wait),
		cmocka_unit_test(test_errors),	    cmocka_unit_test(test_hotpath_verbs),
		cmocka_unit_test(test_hotpath_udp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
