/* SPDX-License-Identifier: MIT */
/*
 * End to end over soft+shm: a daemon process serving qlink_parity and a
 * VPPU in this process, connected with parameters exchanged as text;
 * every answer checked, the server's counters matching the client's; and
 * a server killed mid-stream leaving the client with an error, not a hang.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "demo/demo.h"
#include <qlink/clock.h>
#include <qlink/daemon.h>
#include <qlink/vppu.h>

#include "transport/rendezvous.h" /* libqlink.a: parameters over pipes, as qlink bench */

static int write_line(int fd, const char *s)
{
	return ql__write_all(fd, s, strlen(s)) || ql__write_all(fd, "\n", 1) ? -1 : 0;
}

/* The daemon process: serve until "stop", then report its counters. A
 * silent server connects its channel but starts no dispatcher, so nothing
 * is ever answered (a handler that never returns, seen from the QCS). */
static int server(int rfd, int wfd, bool silent)
{
	struct ql_verbs_channel_config vc = { .num_slots = 32, .slot_size = 128 };
	struct ql_daemon_config dc = { .cpu = -1 };
	struct ql_device *dev;
	struct ql_channel *ch;
	struct ql_daemon *d;
	struct ql_conn_params sp, cp;
	struct ql_daemon_stats st;
	char uri[64], line[512];

	snprintf(uri, sizeof(uri), "soft+shm://e2e-srv%d", (int)getpid());
	if (ql_device_open(uri, &dev) || ql_verbs_channel_create(dev, &vc, &ch) ||
	    ql_daemon_create(&dc, ch, &d) || ql_daemon_register(d, ql_demo_parity_function()) ||
	    ql_verbs_channel_local_params(ch, &sp))
		return 10;
	if (ql__send_params(wfd, &sp))
		return 11;
	if (ql__recv_params(rfd, &cp))
		return 12;
	if (ql_verbs_channel_connect(ch, &cp, NULL) || (!silent && ql_daemon_start(d)))
		return 13;
	if (ql__read_line(rfd, line, sizeof(line)) < 0)
		return 14;
	ql_daemon_stop(d);
	ql_daemon_stats(d, &st);
	snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 " %" PRIu64, st.requests, st.responses,
		 st.ok);
	write_line(wfd, line);
	ql_daemon_destroy(d);
	ql_channel_destroy(ch);
	ql_device_close(dev);
	return 0;
}

struct peer {
	pid_t pid;
	int to, from;
	struct ql_device *dev;
	struct ql_ring_client *cl;
};

static void connect_peer_mode(struct peer *p, bool silent)
{
	int a[2], b[2];
	char uri[64];
	struct ql_conn_params sp, cp;

	assert_int_equal(pipe(a), 0);
	assert_int_equal(pipe(b), 0);
	fflush(NULL);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		close(a[1]);
		close(b[0]);
		alarm(60);
		_exit(server(a[0], b[1], silent));
	}
	close(a[0]);
	close(b[1]);
	p->to = a[1];
	p->from = b[0];
	assert_int_equal(ql__recv_params(p->from, &sp), 0);
	snprintf(uri, sizeof(uri), "soft+shm://e2e-cli%d", (int)getpid());
	assert_int_equal(ql_device_open(uri, &p->dev), 0);
	assert_int_equal(ql_ring_client_create(p->dev, &sp, NULL, &p->cl), 0);
	assert_int_equal(ql_ring_client_local_params(p->cl, &cp), 0);
	assert_int_equal(ql_ring_client_connect(p->cl, &sp, NULL), 0);
	assert_int_equal(ql__send_params(p->to, &cp), 0);
}

static void connect_peer(struct peer *p)
{
	connect_peer_mode(p, false);
}

static void close_peer(struct peer *p)
{
	ql_ring_client_destroy(p->cl);
	assert_int_equal(ql_device_close(p->dev), 0);
	close(p->to);
	close(p->from);
}

static void test_calls_checked_and_counted(void **state)
{
	struct peer p;
	struct ql_vppu_call call;
	struct ql_vppu_report rep;
	struct ql_vppu_config cfg = { .window = 8, .count = 100000, .timeout_ns = 5000000000ull };
	uint64_t seed = 7, req, resp, ok;
	char line[128];
	int st;

	(void)state;
	connect_peer(&p);
	ql_demo_parity_call(&call, &seed);
	assert_int_equal(ql_vppu_run(p.cl, &call, &cfg, &rep), 0);
	assert_int_equal(rep.transport_error, 0);
	assert_int_equal(rep.sent, 100000);
	assert_int_equal(rep.received, 100000);
	assert_int_equal(rep.ok, 100000);
	assert_int_equal(rep.wrong + rep.unexpected + rep.lost + rep.protocol_errors, 0);
	assert_int_equal(ql_hist_count(&rep.rtt_ns), 100000);
	/* a paced phase on the same connection */
	cfg = (struct ql_vppu_config){ .window = 32, .rate_hz = 200000, .count = 20000 };
	assert_int_equal(ql_vppu_run(p.cl, &call, &cfg, &rep), 0);
	assert_int_equal(rep.ok, 20000);
	assert_int_equal(rep.lost, 0);

	assert_int_equal(write_line(p.to, "stop"), 0);
	assert_true(ql__read_line(p.from, line, sizeof(line)) > 0);
	assert_int_equal(sscanf(line, "%" SCNu64 " %" SCNu64 " %" SCNu64, &req, &resp, &ok), 3);
	assert_int_equal(req, 120000);
	assert_int_equal(resp, 120000);
	assert_int_equal(ok, 120000);
	assert_int_equal(waitpid(p.pid, &st, 0), p.pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close_peer(&p);
}

/* The daemon process dies mid-stream: the VPPU returns with an error or
 * unanswered calls, in bounded time. */
static void test_server_killed(void **state)
{
	struct peer p;
	struct ql_vppu_call call;
	struct ql_vppu_report rep;
	struct ql_vppu_config cfg = { .window = 8,
				      .duration_ns = 3000000000ull,
				      .timeout_ns = 500000000ull };
	uint64_t seed = 9, t0;
	int st;

	(void)state;
	connect_peer(&p);
	ql_demo_parity_call(&call, &seed);
	{
		/* first make sure calls are answered */
		struct ql_vppu_config warm = { .window = 8, .count = 1000 };

		assert_int_equal(ql_vppu_run(p.cl, &call, &warm, &rep), 0);
		assert_int_equal(rep.ok, 1000);
	}
	/* let it run, then kill the server from a helper process */
	if (fork() == 0) {
		usleep(300000);
		kill(p.pid, SIGKILL);
		_exit(0);
	}
	t0 = ql_clock_ns();
	assert_int_equal(ql_vppu_run(p.cl, &call, &cfg, &rep), 0);
	assert_true(ql_clock_ns() - t0 < 10ull * 1000000000ull);
	/* after the kill nothing more is answered: the run ended with a
	 * transport error or with unanswered calls */
	assert_true(rep.transport_error != 0 || rep.lost > 0);
	assert_int_equal(rep.wrong, 0);
	assert_int_equal(waitpid(p.pid, &st, 0), p.pid);
	assert_true(WIFSIGNALED(st));
	while (wait(NULL) > 0)
		;
	close_peer(&p);
}

static void end_silent_peer(struct peer *p)
{
	int st;

	assert_int_equal(write_line(p->to, "stop"), 0);
	assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
	assert_true(WIFEXITED(st));
	close_peer(p);
}

/* Nothing is ever answered: a count-bounded closed loop would wait forever
 * with its window full; the per-call timeout ends it in timeout + epsilon,
 * with every call in flight counted as timed out. */
static void test_call_timeout(void **state)
{
	struct peer p;
	struct ql_vppu_call call;
	struct ql_vppu_report rep;
	struct ql_vppu_config cfg = { .window = 4, .count = 1000, .timeout_ns = 300000000ull };
	uint64_t seed = 11, t0, dt;

	(void)state;
	connect_peer_mode(&p, true);
	ql_demo_parity_call(&call, &seed);
	t0 = ql_clock_ns();
	assert_int_equal(ql_vppu_run(p.cl, &call, &cfg, &rep), 0);
	dt = ql_clock_ns() - t0;
	assert_true(dt >= 300000000ull);
	assert_true(dt < 1300000000ull); /* timeout + 1 s of slack on a loaded host */
	assert_true(rep.timed_out);
	assert_false(rep.stopped);
	assert_int_equal(rep.sent, 4);
	assert_int_equal(rep.received, 0);
	assert_int_equal(rep.timeouts, 4);
	assert_int_equal(rep.lost, 4);
	end_silent_peer(&p);
}

static volatile sig_atomic_t stop_flag;

static void on_alarm(int sig)
{
	(void)sig;
	stop_flag = 1;
}

/* The stop flag ends a run whose window is full, long before its call
 * timeout (60 s) or duration would. */
static void test_stop_with_full_window(void **state)
{
	struct peer p;
	struct ql_vppu_call call;
	struct ql_vppu_report rep;
	struct ql_vppu_config cfg = { .window = 8,
				      .duration_ns = 60000000000ull,
				      .timeout_ns = 60000000000ull,
				      .stop = &stop_flag };
	struct itimerval it = { .it_value = { 0, 200000 } };
	uint64_t seed = 13, t0, dt;

	(void)state;
	connect_peer_mode(&p, true);
	ql_demo_parity_call(&call, &seed);
	stop_flag = 0;
	signal(SIGALRM, on_alarm);
	t0 = ql_clock_ns();
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	assert_int_equal(ql_vppu_run(p.cl, &call, &cfg, &rep), 0);
	dt = ql_clock_ns() - t0;
	signal(SIGALRM, SIG_DFL);
	assert_true(dt < 2000000000ull);
	assert_true(rep.stopped);
	assert_int_equal(rep.sent, 8);
	assert_int_equal(rep.lost, 8);
	assert_int_equal(rep.timeouts, 0);
	end_silent_peer(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_calls_checked_and_counted),
		cmocka_unit_test(test_server_killed),
		cmocka_unit_test(test_call_timeout),
		cmocka_unit_test(test_stop_with_full_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
