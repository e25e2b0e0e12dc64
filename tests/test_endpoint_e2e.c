/* SPDX-License-Identifier: MIT */
/*
 * The endpoint service end to end across processes on soft+shm (the server
 * a child process, tests/endpoint_fixture.h): every type with the seed's
 * timing rules made visible (a write handler sees the data, a read handler
 * runs before the data leaves, a receive handler answers per connection),
 * the descriptor cache (a repeated write/read makes no request), zero-copy
 * and bounced buffers, errors that leave the connection usable, many
 * concurrent client processes, the connection limit, and TCP as well as
 * UNIX sockets.
 *
 * QLINK_TEST_EP_DEVICE=URI runs server and clients on another device kind
 * (each process opens its own device of that URI); with QLINK_TEST_IBV_A
 * (and _B) set, as the rxe stage does (tests/rxe/run.sh --extra), the
 * server runs on A and the clients on B (or A).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "endpoint_fixture.h"
#include "free_port.h"
#include <qlink/clock.h>

static const char *dev_srv = "soft+shm://ept-srv";
static const char *dev_cli = "soft+shm://ept-cli";
static struct ept_server server;

static int setup(void **state)
{
	(void)state;
	ept_server_start_unix(&server, dev_srv, "ept", 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return ept_server_stop(&server);
}

static struct ql_ep_client *connect_ok(const char *addr)
{
	struct ql_ep_client *c = NULL;
	int ret = ql_ep_client_connect(dev_cli, addr, &c);

	if (ret)
		fail_msg("connect %s: %d %s", addr, ret, ql_error_detail());
	return c;
}

static void test_every_type(void **state)
{
	struct ql_ep_client *c = connect_ok(server.addr);
	struct ql_ep_client_stats st0, st1;
	const size_t n = 100000;
	uint8_t *zc = ql_ep_client_alloc(c, n); /* registered: zero copy */
	uint8_t *plain = malloc(n);		/* bounced */
	uint64_t v, sum[2];
	char msg[64];
	long got;

	(void)state;
	assert_non_null(zc);
	assert_non_null(plain);
	/* write, then read back what the write handler copied over: the
	 * handler ran after the data landed */
	for (size_t i = 0; i < n; i++)
		zc[i] = (uint8_t)(i * 7 + 1);
	assert_int_equal(ql_ep_write(c, "/data", zc, n), 0);
	memset(plain, 0, n);
	assert_int_equal(ql_ep_read(c, "/data", plain, n), 0);
	assert_memory_equal(plain, zc, n);
	/* again, through the cache: no request goes out */
	ql_ep_client_stats(c, &st0);
	for (size_t i = 0; i < n; i++)
		plain[i] = (uint8_t)(i * 13 + 5);
	assert_int_equal(ql_ep_write(c, "/data", plain, n), 0);
	/* the write returned once data and ack were delivered; its handler
	 * runs after: a request on this connection is answered after it */
	assert_int_equal(ql_ep_recv(c, "/sum", sum, sizeof(sum)), sizeof(sum));
	assert_int_equal(sum[0], n);
	assert_true(sum[1] == ept_fnv64(plain, n));
	memset(zc, 0, n);
	assert_int_equal(ql_ep_read(c, "/data", zc, n), 0);
	assert_memory_equal(plain, zc, n);
	ql_ep_client_stats(c, &st1);
	assert_int_equal(st1.requests, st0.requests + 1); /* the /sum */
	assert_int_equal(st1.cached, st0.cached + 2);
	assert_true(st1.bounced > st0.bounced);
	/* a read handler runs before the data leaves: each read sees the
	 * count of handler runs so far (the first at the descriptor request,
	 * each later one after the previous read's acknowledgement) */
	for (uint64_t k = 1; k <= 5; k++) {
		assert_int_equal(ql_ep_read(c, "/counter", &v, sizeof(v)), 0);
		assert_int_equal(v, k);
	}
	/* send, then receive what the handler made of it */
	assert_int_equal(ql_ep_send(c, "/msg", "hello", 5), 0);
	got = ql_ep_recv(c, "/msg", msg, sizeof(msg));
	assert_int_equal(got, 10);
	assert_memory_equal(msg, "echo:hello", 10);
	/* zero-length send and a receive into registered memory */
	assert_int_equal(ql_ep_send(c, "/msg", "", 0), 0);
	got = ql_ep_recv(c, "/msg", zc, 4096);
	assert_int_equal(got, 5);
	assert_memory_equal(zc, "echo:", 5);
	assert_int_equal(ql_ep_client_free(c, zc), 0);
	assert_int_equal(ql_ep_client_free(c, zc), -EINVAL);
	free(plain);
	ql_ep_client_close(c);
}

static void test_errors_keep_serving(void **state)
{
	struct ql_ep_client *c = connect_ok(server.addr);
	struct ql_ep_server_stats st0, st1;
	static uint8_t big[2u << 20];
	char buf[64];
	size_t size;

	(void)state;
	assert_int_equal(ept_stats_get(dev_cli, server.addr, &st0), 0);
	assert_int_equal(ql_ep_write(c, "/nope", "x", 1), -ENOENT);
	assert_non_null(strstr(ql_error_detail(), "/nope"));
	assert_int_equal(ql_ep_write(c, "/msg", "x", 1), -EPROTOTYPE);
	assert_non_null(strstr(ql_error_detail(), "not of type write"));
	assert_int_equal(ql_ep_send(c, "/data", "x", 1), -EPROTOTYPE);
	assert_int_equal(ql_ep_recv(c, "/counter", buf, sizeof(buf)), -EPROTOTYPE);
	/* oversize: refused by the server on the first call, by the client
	 * from the cached descriptor after */
	assert_int_equal(ql_ep_write(c, "/data", big, sizeof(big)), -EMSGSIZE);
	assert_int_equal(ql_ep_client_size(c, "/data", QL_EP_WRITE, &size), 0);
	assert_int_equal(size, EPT_DATA_SIZE);
	assert_int_equal(ql_ep_write(c, "/data", big, EPT_DATA_SIZE + 1), -EMSGSIZE);
	assert_int_equal(ql_ep_read(c, "/counter", buf, 9), -EMSGSIZE);
	assert_int_equal(ql_ep_send(c, "/msg", big, 4097), -EMSGSIZE);
	/* a receive whose handler produced more than the client takes */
	assert_int_equal(ql_ep_recv(c, "/big", buf, sizeof(buf)), -EMSGSIZE);
	/* a handler's own error reaches the client */
	assert_int_equal(ql_ep_recv(c, "/fail", buf, sizeof(buf)), -EACCES);
	assert_non_null(strstr(ql_error_detail(), "handler failed"));
	/* bad paths never leave the client */
	assert_int_equal(ql_ep_write(c, "nope", "x", 1), -EINVAL);
	/* and the connection still works */
	assert_int_equal(ql_ep_send(c, "/msg", "still", 5), 0);
	assert_int_equal(ql_ep_recv(c, "/msg", buf, sizeof(buf)), 10);
	assert_memory_equal(buf, "echo:still", 10);
	assert_int_equal(ql_ep_recv(c, "/big", big, sizeof(big)), 8192);
	assert_int_equal(big[8191], 'B');
	ql_ep_client_close(c);
	assert_int_equal(ept_stats_get(dev_cli, server.addr, &st1), 0);
	assert_int_equal(st1.violations, st0.violations);
	assert_true(st1.requests_refused >= st0.requests_refused + 7);
}

/* A client that writes, sends and is gone at once: what it delivered is
 * still handled (the server drains a connection before closing it). */
static void test_write_then_exit(void **state)
{
	uint8_t pat[1000];
	uint64_t sum[2] = { 0, 0 };
	struct ql_ep_client *c = connect_ok(server.addr);
	int status;
	pid_t pid;

	(void)state;
	for (size_t i = 0; i < sizeof(pat); i++)
		pat[i] = (uint8_t)(i ^ 0x5a);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ql_ep_client *w;

		if (ql_ep_client_connect(dev_cli, server.addr, &w) ||
		    ql_ep_write(w, "/data", pat, sizeof(pat)))
			_exit(1);
		_exit(0); /* no close: the process just ends */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 0; i < 200; i++) {
		assert_int_equal(ql_ep_recv(c, "/sum", sum, sizeof(sum)), sizeof(sum));
		if (sum[0] == sizeof(pat))
			break;
		usleep(10000);
	}
	assert_int_equal(sum[0], sizeof(pat));
	assert_true(sum[1] == ept_fnv64(pat, sizeof(pat)));
	ql_ep_client_close(c);
}

#define NCHILD 8
/* a real (or emulated: rxe under qemu) device is slower: fewer rounds, a
 * longer wait per call for the 8 clients sharing 2 CPUs */
#define ROUNDS (soft_dev ? 100 : 20)
static int soft_dev = 1;

static int child_client(int id)
{
	struct ql_ep_client *c;
	char msg[64], want[80], got[128];
	uint64_t v, last = 0;
	static uint8_t buf[4096];

	if (ql_ep_client_connect(dev_cli, server.addr, &c)) {
		fprintf(stderr, "child %d: %s\n", id, ql_error_detail());
		return 1;
	}
	if (!soft_dev)
		ql_ep_client_set_timeout(c, 60000);
	for (int k = 0; k < ROUNDS; k++) {
		int n = snprintf(msg, sizeof(msg), "client %d round %d", id, k);
		long r;

		snprintf(want, sizeof(want), "echo:%s", msg);
		if (ql_ep_send(c, "/msg", msg, (size_t)n)) {
			fprintf(stderr, "child %d round %d: send: %s\n", id, k, ql_error_detail());
			return 2;
		}
		r = ql_ep_recv(c, "/msg", got, sizeof(got));
		if (r != n + 5 || memcmp(got, want, (size_t)r)) {
			fprintf(stderr, "child %d: got %ld '%.*s' want '%s'\n", id, r,
				(int)(r > 0 ? r : 0), got, want);
			return 3;
		}
		memset(buf, id, sizeof(buf));
		if (ql_ep_write(c, "/data", buf, sizeof(buf)) ||
		    ql_ep_read(c, "/data", buf, sizeof(buf))) {
			fprintf(stderr, "child %d round %d: %s\n", id, k, ql_error_detail());
			return 4;
		}
		if (ql_ep_read(c, "/counter", &v, sizeof(v)) || v <= last) {
			fprintf(stderr, "child %d round %d: counter: %s\n", id, k,
				ql_error_detail());
			return 5;
		}
		last = v;
	}
	ql_ep_client_close(c);
	return 0;
}

static void test_many_clients(void **state)
{
	struct ql_ep_server_stats st0, st1;
	pid_t pid[NCHILD];

	(void)state;
	assert_int_equal(ept_stats_get(dev_cli, server.addr, &st0), 0);
	fflush(NULL);
	for (int i = 0; i < NCHILD; i++) {
		pid[i] = fork();
		assert_true(pid[i] >= 0);
		if (pid[i] == 0)
			_exit(child_client(i));
	}
	for (int i = 0; i < NCHILD; i++) {
		int status;

		assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	assert_int_equal(ept_stats_get(dev_cli, server.addr, &st1), 0);
	assert_int_equal(st1.conns_accepted, st0.conns_accepted + NCHILD + 1);
	assert_int_equal(st1.violations, st0.violations);
	assert_int_equal(st1.data, st0.data + NCHILD * ROUNDS);
	assert_int_equal(st1.conns_open, 1); /* the stats connection */
}

static void test_connection_limit(void **state)
{
	struct ept_server small;
	struct ql_ep_client *a, *b, *c;

	(void)state;
	ept_server_start_unix(&small, dev_srv, "ept-small", 2);
	a = connect_ok(small.addr);
	b = connect_ok(small.addr);
	assert_int_equal(ql_ep_client_connect(dev_cli, small.addr, &c), -EUSERS);
	assert_non_null(strstr(ql_error_detail(), "too many connections"));
	ql_ep_client_close(b);
	/* the server notices the close through the socket */
	for (int i = 0; i < 200 && ql_ep_client_connect(dev_cli, small.addr, &c); i++)
		usleep(10000);
	assert_int_equal(ql_ep_send(c, "/msg", "x", 1), 0);
	assert_int_equal(ql_ep_send(a, "/msg", "y", 1), 0);
	ql_ep_client_close(c);
	ql_ep_client_close(a);
	assert_int_equal(ept_server_stop(&small), 0);
}

static void test_tcp(void **state)
{
	struct ept_server t;
	struct ql_ep_client *c;
	char buf[32];

	(void)state;
	ept_server_start(&t, dev_srv, "127.0.0.1:0", 0);
	assert_non_null(strstr(t.addr, "127.0.0.1:"));
	c = connect_ok(t.addr);
	assert_int_equal(ql_ep_write(c, "/data", "tcp", 3), 0);
	assert_int_equal(ql_ep_read(c, "/data", buf, 3), 0);
	assert_memory_equal(buf, "tcp", 3);
	ql_ep_client_close(c);
	assert_int_equal(ept_server_stop(&t), 0);
	/* nobody there */
	assert_true(ql_ep_client_connect(dev_cli, t.addr, &c) < 0);
	assert_int_equal(ql_ep_client_connect(dev_cli, "nohost", &c), -EINVAL);
}

/* IPv6: "[::1]:0" listens on ::1 and names itself "[::1]:PORT"; a
 * client connects to it; an unbracketed IPv6 address is refused (it cannot
 * be split from its port), as are malformed brackets. */
static void test_tcp_ipv6(void **state)
{
	struct ept_server t;
	struct ql_ep_client *c;
	char buf[32];

	(void)state;
	ept_server_start(&t, dev_srv, "[::1]:0", 0);
	assert_non_null(strstr(t.addr, "[::1]:"));
	c = connect_ok(t.addr);
	assert_int_equal(ql_ep_write(c, "/data", "six", 3), 0);
	assert_int_equal(ql_ep_read(c, "/data", buf, 3), 0);
	assert_memory_equal(buf, "six", 3);
	ql_ep_client_close(c);
	assert_int_equal(ept_server_stop(&t), 0);
	assert_int_equal(ql_ep_client_connect(dev_cli, "::1:7471", &c), -EINVAL);
	assert_int_equal(ql_ep_client_connect(dev_cli, "[::1:7471", &c), -EINVAL);
	assert_int_equal(ql_ep_client_connect(dev_cli, "[::1]7471", &c), -EINVAL);
	assert_int_equal(ql_ep_client_connect(dev_cli, "[]:7471", &c), -EINVAL);
	assert_int_equal(ql_ep_client_connect(dev_cli, "[127.0.0.1]:7471", &c), -EINVAL);
}

/* Issue 22 item 6: 200 idle TCP connections (connected, no hello) held
 * every slot for the hello deadline (5 s), and a client that says its hello
 * was refused. Now a connection still in its hello gives way to a newer
 * one: the legitimate client gets in while the idle ones are still open. */
static void test_idle_flood(void **state)
{
	enum { NIDLE = 200 };
	struct ept_server t;
	struct ql_ep_client *c = NULL;
	int fds[NIDLE], port, ret = -1;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint64_t t0;

	(void)state;
	ept_server_start(&t, dev_srv, "127.0.0.1:0", 8);
	port = atoi(strrchr(t.addr, ':') + 1);
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < NIDLE; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		assert_true(fds[i] >= 0);
		if (connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS)
			fail_msg("connect: %s", strerror(errno));
	}
	usleep(100000); /* the server takes them all */
	t0 = ql_clock_ns();
	ret = ql_ep_client_connect(dev_cli, t.addr, &c);
	if (ret)
		fail_msg("a client with a hello was locked out by %d idle connections: %s", NIDLE,
			 ql_error_detail());
	assert_true(ql_clock_ns() - t0 < 1000000000ull);
	assert_int_equal(ql_ep_write(c, "/data", "in", 2), 0);
	ql_ep_client_close(c);
	for (int i = 0; i < NIDLE; i++)
		close(fds[i]);
	assert_int_equal(ept_server_stop(&t), 0);
}

/* A client in caller progress mode (soft+udp, docs/progress.md §4, §10)
 * whose application does nothing on the client between calls for longer
 * than the server's retry budget (7 retries of the 67 ms local ACK
 * timeout): whatever the server sent for a call (its reply, a read
 * handler's READY, the credit write every QL_EPA_CREDIT acks) must have
 * been received and acknowledged before the call returned, or the
 * server's send fails (RETRY_EXC_ERR), the server closes the connection
 * and the next call fails. */
#define IDLE_US (1500 * 1000)
static struct ept_server idle_srv;
static struct ql_ep_client *idle_cli;

static void idle_start(void)
{
	const char *ibv = getenv("QLINK_TEST_IBV_A");
	int port;
	char srv_uri[96], cli_uri[96];

	if (ibv && *ibv)
		skip(); /* the rxe stage runs the ibv devices; these are soft+udp's */
	port = ql_test_free_ports(1);
	assert_true(port > 0);
	snprintf(srv_uri, sizeof(srv_uri), "soft+udp://127.0.0.1:%d?progress=caller", port);
	snprintf(cli_uri, sizeof(cli_uri), "soft+udp://127.0.0.2:%d?progress=caller", port);
	ept_server_start_unix(&idle_srv, srv_uri, "ept-idle", 0);
	if (ql_ep_client_connect(cli_uri, idle_srv.addr, &idle_cli))
		fail_msg("connect: %s", ql_error_detail());
}

static int idle_teardown(void **state)
{
	int ret;

	(void)state;
	ql_ep_client_close(idle_cli);
	idle_cli = NULL;
	ret = idle_srv.pid > 0 ? ept_server_stop(&idle_srv) : 0;
	idle_srv.pid = 0;
	return ret;
}

static void test_caller_idle_reply(void **state)
{
	char msg[64];

	(void)state;
	idle_start();
	assert_int_equal(ql_ep_send(idle_cli, "/msg", "idle", 4), 0);
	for (int i = 0; i < 2; i++) {
		usleep(IDLE_US); /* no call on the device */
		assert_int_equal(ql_ep_recv(idle_cli, "/msg", msg, sizeof(msg)), 9);
		assert_memory_equal(msg, "echo:idle", 9);
	}
}

static void test_caller_idle_ready(void **state)
{
	(void)state;
	idle_start();
	/* /counter has a read handler: its READY follows each read */
	for (uint64_t k = 1; k <= 3; k++) {
		uint64_t v = 0;

		assert_int_equal(ql_ep_read(idle_cli, "/counter", &v, sizeof(v)), 0);
		assert_int_equal(v, k);
		usleep(IDLE_US);
	}
}

static void test_caller_idle_credit(void **state)
{
	static uint8_t buf[64];

	(void)state;
	idle_start();
	/* the server writes its credit after the 16th ack, the 32nd */
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 16; i++)
			assert_int_equal(ql_ep_write(idle_cli, "/data", buf, sizeof(buf)), 0);
		usleep(IDLE_US);
	}
	assert_int_equal(ql_ep_write(idle_cli, "/data", buf, sizeof(buf)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_type),
		cmocka_unit_test(test_errors_keep_serving),
		cmocka_unit_test(test_write_then_exit),
		cmocka_unit_test(test_many_clients),
		cmocka_unit_test(test_connection_limit),
		cmocka_unit_test(test_tcp),
		cmocka_unit_test(test_tcp_ipv6),
		cmocka_unit_test(test_idle_flood),
		cmocka_unit_test_teardown(test_caller_idle_reply, idle_teardown),
		cmocka_unit_test_teardown(test_caller_idle_ready, idle_teardown),
		cmocka_unit_test_teardown(test_caller_idle_credit, idle_teardown),
	};
	const char *d = getenv("QLINK_TEST_EP_DEVICE");
	const char *a = getenv("QLINK_TEST_IBV_A"), *b = getenv("QLINK_TEST_IBV_B");

	if (d && *d)
		dev_srv = dev_cli = d;
	if (a && *a) {
		dev_srv = a;
		dev_cli = b && *b ? b : a;
	}
	soft_dev = !strncmp(dev_srv, "soft", 4);
	return cmocka_run_group_tests(tests, setup, teardown);
}
