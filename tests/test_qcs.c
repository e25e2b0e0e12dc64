/* SPDX-License-Identifier: MIT */
/*
 * QCSDevice end to end over 127.0.0.1 and soft+shm: this process is the RTH
 * (a QCS device, a verbs channel and a daemon serving qlink_parity), and the
 * QCS is the built `qlink vppu --device` in a child process. Establish,
 * upload, trigger, completion and the daemon's counters; an upload across
 * lost datagrams; an abort mid-run; establish_connection timing out; a QCS
 * with the wrong name refused. Every wait is bounded.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "demo/demo.h"
#include "qlink/control.h"
#include "qlink/daemon.h"
#include "qlink/error.h"
#include "qlink/qcs.h"

#ifndef QL_TEST_QLINK
#error "QL_TEST_QLINK (the qlink binary) must be defined by the build"
#endif

static const char parity_program[] = "calls:\n"
				     "  - function: qlink_parity\n"
				     "    args:\n"
				     "      - { type: bits, n: 256, gen: ones }\n"
				     "    expect:\n"
				     "      - { type: u8, value: 0 }\n"
				     "      - { type: i32, value: 256 }\n"
				     "    repeat: 1000\n";

/* Paced at 200 calls/s for 500 s: only an abort ends it within the test. */
static const char slow_program[] = "calls:\n"
				   "  - function: qlink_parity\n"
				   "    args:\n"
				   "      - { type: bits, n: 256, gen: ones }\n"
				   "    expect:\n"
				   "      - { type: u8, value: 0 }\n"
				   "      - { type: i32, value: 256 }\n"
				   "    rate_hz: 200\n"
				   "    repeat: 100000\n";

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- the RTH: device, channel, daemon ----------------------------------- */

struct rth {
	struct ql_device *vdev;
	struct ql_channel *ch;
	struct ql_daemon *d;
	struct ql_qcs_device *qcs;
	uint16_t port;
};

static int rth_instance;

static void rth_open(struct rth *r, const char *qcs_name)
{
	struct ql_verbs_channel_config vc = { .num_slots = 32, .slot_size = 128 };
	struct ql_daemon_config dc = { .cpu = -1 };
	struct ql_ctl_server_config cc = {
		.bind_addr = "127.0.0.1",
		.session_timeout_ms = 3000,
		.request_timeout_ms = 50,
		.request_retries = 8,
	};
	char uri[64];

	memset(r, 0, sizeof(*r));
	snprintf(uri, sizeof(uri), "soft+shm://qcs-rth%d-%d", (int)getpid(), rth_instance++);
	assert_int_equal(ql_device_open(uri, &r->vdev), 0);
	assert_int_equal(ql_verbs_channel_create(r->vdev, &vc, &r->ch), 0);
	assert_int_equal(ql_daemon_create(&dc, r->ch, &r->d), 0);
	assert_int_equal(ql_daemon_register(r->d, ql_demo_parity_function()), 0);
	assert_int_equal(ql_qcs_device_create(&cc, qcs_name, &r->qcs), 0);
	r->port = ql_ctl_server_port(ql_qcs_device_server(r->qcs));
	assert_true(r->port > 0);
}

static void rth_close(struct rth *r)
{
	ql_qcs_device_destroy(r->qcs);
	ql_daemon_destroy(r->d);
	ql_channel_destroy(r->ch);
	assert_int_equal(ql_device_close(r->vdev), 0);
}

static struct ql_daemon_stats daemon_stats(struct rth *r)
{
	struct ql_daemon_stats st;

	ql_daemon_stats(r->d, &st);
	return st;
}

/* ---- the QCS: qlink vppu --device in a child --------------------------- */

static pid_t vppu_start(uint16_t port, const char *name)
{
	char hp[32], uri[64];
	pid_t pid;

	snprintf(hp, sizeof(hp), "127.0.0.1:%u", port);
	snprintf(uri, sizeof(uri), "soft+shm://qcs-vppu%d-%d", (int)getpid(), rth_instance);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The alarm survives exec: a stuck child cannot outlive the test. */
		alarm(60);
		execl(QL_TEST_QLINK, "qlink", "vppu", "--connect", hp, "--qcs-device", "--name",
		      name, "--device", uri, "--cpu", "-1", "--timeout", "20", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The child's exit status, waiting at most ms; -1 if it did not exit (then
 * it is killed). */
static int vppu_wait(pid_t pid, int ms)
{
	uint64_t deadline = now_ms() + (uint64_t)ms;
	int st;

	while (now_ms() < deadline) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static void wait_complete(struct rth *r, int ms)
{
	uint64_t deadline = now_ms() + (uint64_t)ms;

	while (!ql_qcs_is_complete(r->qcs) && now_ms() < deadline)
		ql_qcs_poll(r->qcs, 10);
	assert_true(ql_qcs_is_complete(r->qcs));
}

/* ---- tests ------------------------------------------------------------- */

static void test_program_roundtrip(void **state)
{
	struct ql_ctl_msg m = { .type = QL_CTL_PROGRAM,
				.session = 0x1234,
				.rseq = 9,
				.offset = 4,
				.total = 10,
				.data_len = 6 };
	struct ql_ctl_msg out;
	uint8_t buf[QL_CTL_MAX_DGRAM];
	int n;

	memcpy(m.data, "\0\1\2abc", 6);
	n = ql_ctl_format(&m, NULL, 0, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(ql_ctl_parse(buf, (size_t)n, NULL, 0, &out), 0);
	assert_int_equal(out.type, QL_CTL_PROGRAM);
	assert_int_equal(out.rseq, 9);
	assert_int_equal(out.seq, 0);
	assert_int_equal(out.offset, 4);
	assert_int_equal(out.total, 10);
	assert_int_equal(out.data_len, 6);
	assert_memory_equal(out.data, "\0\1\2abc", 6);
	/* A full chunk with a MAC still fits a datagram. */
	m.data_len = QL_CTL_CHUNK_MAX;
	m.offset = 0;
	m.total = QL_CTL_PROGRAM_MAX;
	n = ql_ctl_format(&m, (const uint8_t *)"k", 1, buf, sizeof(buf));
	assert_true(n > 0 && n <= QL_CTL_MAX_DGRAM);
	/* Chunks beyond the program, oversized programs, bad base64. */
	m.offset = QL_CTL_PROGRAM_MAX - 1;
	assert_int_equal(ql_ctl_format(&m, NULL, 0, buf, sizeof(buf)), -EINVAL);
	{
		static const char *const bad[] = {
			"{\"v\":2,\"type\":\"PROGRAM\",\"session\":\"1\",\"seq\":0,\"rseq\":1,"
			"\"offset\":8,\"total\":10,\"data\":\"AAAA\"}",
			"{\"v\":2,\"type\":\"PROGRAM\",\"session\":\"1\",\"seq\":0,\"rseq\":1,"
			"\"offset\":0,\"total\":262145,\"data\":\"AAAA\"}",
			"{\"v\":2,\"type\":\"PROGRAM\",\"session\":\"1\",\"seq\":0,\"rseq\":1,"
			"\"offset\":0,\"total\":10,\"data\":\"A*AA\"}",
			"{\"v\":2,\"type\":\"PROGRAM\",\"session\":\"1\",\"seq\":0,\"rseq\":1,"
			"\"offset\":0,\"total\":10}",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			assert_int_equal(ql_ctl_parse((const uint8_t *)bad[i], strlen(bad[i]), NULL,
						      0, &out),
					 -EBADMSG);
	}
}

static void test_upload_trigger_complete(void **state)
{
	struct rth r;
	pid_t pid;
	struct ql_daemon_stats st;

	rth_open(&r, "qcs0");
	pid = vppu_start(r.port, "qcs0");
	assert_false(ql_qcs_is_connected(r.qcs));
	assert_int_equal(ql_qcs_establish_connection(r.qcs, r.ch, 10000), 0);
	assert_true(ql_qcs_is_connected(r.qcs));
	assert_int_equal(ql_qcs_establish_connection(r.qcs, r.ch, 10), -EISCONN);
	assert_int_equal(ql_daemon_start(r.d), 0);
	/* Nothing to run yet; then a program the QCS cannot parse. */
	assert_int_equal(ql_qcs_trigger(r.qcs, 2000), -EPROTO);
	assert_non_null(strstr(ql_error_detail(), "TRIGGER before a complete PROGRAM"));
	assert_int_equal(ql_qcs_upload_program(r.qcs, "calls: 7\n", 9, 2000), -ECONNREFUSED);
	assert_non_null(strstr(ql_error_detail(), "qcs: refused: program failed"));
	assert_int_equal(ql_qcs_upload_program(r.qcs, parity_program, strlen(parity_program), 5000),
			 0);
	assert_false(ql_qcs_is_complete(r.qcs));
	assert_int_equal(ql_qcs_trigger(r.qcs, 2000), 0);
	wait_complete(&r, 20000);
	assert_false(ql_qcs_is_connected(r.qcs));
	assert_int_equal(vppu_wait(pid, 10000), 0);
	ql_daemon_stop(r.d);
	st = daemon_stats(&r);
	assert_int_equal(st.requests, 1000);
	assert_int_equal(st.ok, 1000);
	assert_int_equal(ql_qcs_disconnect(r.qcs), 0);
	/* Once complete, the device has no QCS to talk to. */
	assert_int_equal(ql_qcs_trigger(r.qcs, 100), -ENOTCONN);
	rth_close(&r);
}

/* A UDP relay that drops the first datagram of each direction containing a
 * marker. */
struct relay {
	int fd_qcs, fd_rth;
	uint16_t port;
	const char *drop_down, *drop_up; /* RTH -> QCS, QCS -> RTH */
	int dropped_down, dropped_up;
	int stop;
	pthread_t thread;
};

static void *relay_main(void *arg)
{
	struct relay *p = arg;
	struct sockaddr_in peer;
	socklen_t plen = 0;
	uint8_t buf[2048];

	while (!__atomic_load_n(&p->stop, __ATOMIC_SEQ_CST)) {
		struct pollfd pf[2] = { { .fd = p->fd_qcs, .events = POLLIN },
					{ .fd = p->fd_rth, .events = POLLIN } };
		ssize_t n;

		if (poll(pf, 2, 10) <= 0)
			continue;
		if (pf[0].revents & POLLIN) {
			plen = sizeof(peer);
			n = recvfrom(p->fd_qcs, buf, sizeof(buf) - 1, 0, (struct sockaddr *)&peer,
				     &plen);
			if (n > 0) {
				buf[n] = 0;
				if (!p->dropped_up && strstr((char *)buf, p->drop_up))
					p->dropped_up++;
				else
					send(p->fd_rth, buf, (size_t)n, 0);
			}
		}
		if (pf[1].revents & POLLIN) {
			n = recv(p->fd_rth, buf, sizeof(buf) - 1, 0);
			if (n > 0 && plen) {
				buf[n] = 0;
				if (!p->dropped_down && strstr((char *)buf, p->drop_down))
					p->dropped_down++;
				else
					sendto(p->fd_qcs, buf, (size_t)n, 0,
					       (struct sockaddr *)&peer, plen);
			}
		}
	}
	return NULL;
}

static void relay_start(struct relay *p, uint16_t rth_port)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	p->fd_qcs = socket(AF_INET, SOCK_DGRAM, 0);
	assert_int_equal(bind(p->fd_qcs, (struct sockaddr *)&a, sizeof(a)), 0);
	getsockname(p->fd_qcs, (struct sockaddr *)&a, &alen);
	p->port = ntohs(a.sin_port);
	p->fd_rth = socket(AF_INET, SOCK_DGRAM, 0);
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	to.sin_port = htons(rth_port);
	assert_int_equal(connect(p->fd_rth, (struct sockaddr *)&to, sizeof(to)), 0);
	assert_int_equal(pthread_create(&p->thread, NULL, relay_main, p), 0);
}

static void relay_stop(struct relay *p)
{
	__atomic_store_n(&p->stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(p->thread, NULL);
	close(p->fd_qcs);
	close(p->fd_rth);
}

static void test_upload_with_loss(void **state)
{
	struct relay p = { .drop_down = "\"PROGRAM\"", .drop_up = "\"re\":\"PROGRAM\"" };
	struct ql_ctl_stats cs;
	char program[4096];
	size_t len;
	struct rth r;
	pid_t pid;

	/* Several chunks: the program after a long comment line. */
	program[0] = '#';
	memset(program + 1, '.', 2500);
	program[2501] = '\n';
	len = 2502 + (size_t)snprintf(program + 2502, sizeof(program) - 2502, "%s", parity_program);
	assert_true(len > 3 * QL_CTL_CHUNK_MAX);
	rth_open(&r, NULL);
	relay_start(&p, r.port);
	pid = vppu_start(p.port, "lossy");
	assert_int_equal(ql_qcs_establish_connection(r.qcs, r.ch, 10000), 0);
	assert_int_equal(ql_daemon_start(r.d), 0);
	assert_int_equal(ql_qcs_upload_program(r.qcs, program, len, 5000), 0);
	/* A chunk and an answer were lost: each was made good by a retransmission, the
	 * second answered from the QCS's reply cache (its upload is whole, not doubled). */
	assert_int_equal(p.dropped_down, 1);
	assert_int_equal(p.dropped_up, 1);
	ql_ctl_server_stats(ql_qcs_device_server(r.qcs), &cs);
	assert_true(cs.replied >= (len + QL_CTL_CHUNK_MAX - 1) / QL_CTL_CHUNK_MAX + 2 + 1);
	assert_int_equal(ql_qcs_trigger(r.qcs, 2000), 0);
	wait_complete(&r, 20000);
	assert_int_equal(vppu_wait(pid, 10000), 0);
	ql_daemon_stop(r.d);
	assert_int_equal(daemon_stats(&r).ok, 1000);
	relay_stop(&p);
	rth_close(&r);
}

static void test_abort_mid_run(void **state)
{
	struct ql_daemon_stats st;
	uint64_t t0;
	struct rth r;
	pid_t pid;

	rth_open(&r, "qcs0");
	pid = vppu_start(r.port, "qcs0");
	assert_int_equal(ql_qcs_establish_connection(r.qcs, r.ch, 10000), 0);
	assert_int_equal(ql_daemon_start(r.d), 0);
	assert_int_equal(ql_qcs_upload_program(r.qcs, slow_program, strlen(slow_program), 5000), 0);
	assert_int_equal(ql_qcs_trigger(r.qcs, 2000), 0);
	assert_int_equal(ql_qcs_trigger(r.qcs, 2000), -EPROTO); /* it runs already */
	t0 = now_ms();
	while (now_ms() - t0 < 400)
		ql_qcs_poll(r.qcs, 10);
	assert_false(ql_qcs_is_complete(r.qcs));
	assert_true(daemon_stats(&r).ok > 0);
	assert_int_equal(ql_qcs_abort(r.qcs, 2000), 0);
	assert_false(ql_qcs_is_connected(r.qcs));
	assert_int_equal(vppu_wait(pid, 5000), 3);
	assert_false(ql_qcs_is_complete(r.qcs));
	ql_daemon_stop(r.d);
	st = daemon_stats(&r);
	assert_true(st.ok > 0 && st.ok < 1000);
	assert_int_equal(st.requests, st.ok);
	assert_int_equal(ql_qcs_abort(r.qcs, 100), -ENOTCONN);
	assert_int_equal(ql_qcs_disconnect(r.qcs), 0);
	rth_close(&r);
}

static void test_establish_timeout(void **state)
{
	struct rth r;
	uint64_t t0;

	rth_open(&r, NULL);
	t0 = now_ms();
	assert_int_equal(ql_qcs_establish_connection(r.qcs, r.ch, 200), -ETIMEDOUT);
	assert_true(now_ms() - t0 >= 200 && now_ms() - t0 < 2000);
	assert_non_null(strstr(ql_error_detail(), "no QCS connected within 200 ms"));
	assert_false(ql_qcs_is_connected(r.qcs));
	assert_int_equal(ql_qcs_upload_program(r.qcs, "x", 1, 100), -ENOTCONN);
	rth_close(&r);
}

struct intruder {
	uint16_t port;
	int result;
	char detail[256];
	_Atomic int done;
};

static void *intruder_main(void *arg)
{
	struct intruder *in = arg;
	struct ql_ctl_client_config cfg = { .name = "intruder", .timeout_ms = 50, .retries = 4 };
	struct ql_conn_params rth;
	struct ql_ctl_client *cl;
	char hp[32];

	snprintf(hp, sizeof(hp), "127.0.0.1:%u", in->port);
	in->result = ql_ctl_client_create(hp, NULL, 0, &cfg, &cl);
	if (in->result)
		return NULL;
	in->result = ql_ctl_client_discover(cl, 1, &rth);
	snprintf(in->detail, sizeof(in->detail), "%s", ql_error_detail());
	ql_ctl_client_destroy(cl);
	atomic_store(&in->done, 1);
	return NULL;
}

static void test_wrong_name_refused(void **state)
{
	struct intruder in = { 0 };
	pthread_t t;
	struct rth r;
	pid_t pid;

	rth_open(&r, "qcs0");
	in.port = r.port;
	assert_int_equal(pthread_create(&t, NULL, intruder_main, &in), 0);
	pid = vppu_start(r.port, "qcs0");
	assert_int_equal(ql_qcs_establish_connection(r.qcs, r.ch, 10000), 0);
	/* the intruder's DISCOVER may still be on its way: keep answering */
	for (int i = 0; i < 2000 && !atomic_load(&in.done); i++)
		ql_qcs_poll(r.qcs, 10);
	pthread_join(t, NULL);
	assert_int_equal(in.result, -ECONNREFUSED);
	assert_non_null(strstr(in.detail, "waits for QCS 'qcs0', not 'intruder'"));
	assert_int_equal(ql_daemon_start(r.d), 0);
	assert_int_equal(ql_qcs_upload_program(r.qcs, parity_program, strlen(parity_program), 5000),
			 0);
	assert_int_equal(ql_qcs_trigger(r.qcs, 2000), 0);
	wait_complete(&r, 20000);
	assert_int_equal(vppu_wait(pid, 10000), 0);
	ql_daemon_stop(r.d);
	assert_int_equal(daemon_stats(&r).ok, 1000);
	rth_close(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_program_roundtrip),
		cmocka_unit_test(test_upload_trigger_complete),
		cmocka_unit_test(test_upload_with_loss),
		cmocka_unit_test(test_abort_mid_run),
		cmocka_unit_test(test_establish_timeout),
		cmocka_unit_test(test_wrong_name_refused),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
