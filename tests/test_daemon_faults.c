/* SPDX-License-Identifier: MIT */
/*
 * Faults of handlers, contained: a handler that never returns fails its own
 * daemon only (the watchdog moves the other daemons of its dispatcher to a
 * fresh thread, and a stop still returns); a handler that writes past its
 * result capacity is answered QL_RPC_E_INTERNAL and counted, and the next
 * request is served; a handler that crashes gets its name printed by the
 * crash report before the process dies.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "echo_daemon.h"

#include <qlink/channel.h>
#include <qlink/clock.h>
#include <qlink/daemon.h>
#include <qlink/dispatcher.h>
#include <qlink/rpc.h>

#define SLOTS 16
#define SLOT_SIZE 128
#define DEADLINE_NS 50000000ull /* 50 ms */

static atomic_int release_spin;
static _Atomic uint64_t spin_t0; /* when h_spin was entered; 0: not yet */

/* Never returns (until the test lets it). */
static int32_t h_spin(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)in;
	(void)out;
	(void)ctx;
	atomic_store(&spin_t0, ql_clock_ns());
	while (!atomic_load(&release_spin))
		;
	return 0;
}

/* Writes 4 bytes past the capacity it was given. */
static int32_t h_smash(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)in;
	(void)ctx;
	memset(out->p, 0xab, (size_t)(out->end - out->p) + 4);
	return 0;
}

/* Stores through ctx, an unmapped address (not NULL: the sanitizers'
 * null check would end the process before the fault). */
static int32_t h_crash(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	volatile int *p = ctx;

	(void)in;
	(void)out;
	*p = 1;
	return 0;
}

static int push(struct ql_channel *ch, const char *fn, uint32_t n)
{
	uint8_t msg[64];
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = ql_rpc_fnv1a(fn),
		.arg_len = 4,
		.request_id = n,
	};

	ql_rpc_header_encode(msg, &h);
	memcpy(msg + QL_RPC_HEADER_SIZE, &n, 4);
	return ql_loop_channel_push(ch, msg, QL_RPC_HEADER_SIZE + 4, QL_RPC_HEADER_SIZE + 4);
}

/* Wait up to ms for a response; its status (request_id checked), or
 * INT32_MIN when none came. */
static int32_t pop(struct ql_channel *ch, uint32_t n, unsigned ms)
{
	uint64_t t0 = ql_clock_ns();
	uint8_t buf[SLOT_SIZE];
	struct ql_rpc_response r;
	int len;

	while ((len = ql_loop_channel_pop(ch, buf, sizeof(buf))) == -EAGAIN) {
		if (ql_clock_ns() - t0 > (uint64_t)ms * 1000000)
			return INT32_MIN;
	}
	assert_true(len >= (int)QL_RPC_RESPONSE_SIZE);
	ql_rpc_response_decode(buf, &r);
	assert_int_equal(r.request_id, n);
	if (r.status == 0) {
		uint32_t got;

		assert_int_equal(r.result_len, 4);
		memcpy(&got, buf + QL_RPC_RESPONSE_SIZE, 4);
		assert_int_equal(got, n);
	}
	return r.status;
}

static struct ql_daemon *daemon_with(struct ql_channel **ch)
{
	struct ql_daemon_config dc = { .cpu = -1 };
	struct ql_daemon *d;

	assert_int_equal(ql_loop_channel_create(SLOTS, SLOT_SIZE, ch), 0);
	assert_int_equal(ql_daemon_create(&dc, *ch, &d), 0);
	assert_int_equal(ql_daemon_register(d, &QL_RPC_RAW_FUNCTION("echo", ql_test_echo, NULL)),
			 0);
	assert_int_equal(ql_daemon_register(d, &QL_RPC_RAW_FUNCTION("spin", h_spin, NULL)), 0);
	assert_int_equal(ql_daemon_register(d, &QL_RPC_RAW_FUNCTION("smash", h_smash, NULL)), 0);
	assert_int_equal(ql_daemon_register(d, &QL_RPC_RAW_FUNCTION("crash", h_crash, (void *)16)),
			 0);
	return d;
}

/* Two daemons on one dispatcher; one's handler never returns. */
static void test_deadline(void **state)
{
	struct ql_dispatcher_config pc = { .cpu = -1, .call_deadline_ns = DEADLINE_NS };
	struct ql_channel *cha, *chb;
	struct ql_daemon *a = daemon_with(&cha), *b = daemon_with(&chb);
	struct ql_dispatcher *p;
	struct ql_dispatcher_stats ps;
	struct ql_daemon_stats st;
	char fn[64];
	uint64_t t0;

	(void)state;
	atomic_store(&release_spin, 0);
	assert_int_equal(ql_dispatcher_create(&pc, &p), 0);
	assert_int_equal(ql_dispatcher_attach(p, a), 0);
	assert_int_equal(ql_dispatcher_attach(p, b), 0);
	assert_int_equal(ql_dispatcher_start(p), 0);
	assert_int_equal(push(chb, "echo", 1), 0);
	assert_int_equal(pop(chb, 1, 5000), 0);

	/* a's handler hangs the thread; b's next request waits for the
	 * watchdog, then is served by the replacement thread */
	atomic_store(&spin_t0, 0);
	assert_int_equal(push(cha, "spin", 2), 0);
	for (t0 = ql_clock_ns(); !atomic_load(&spin_t0);)
		assert_true(ql_clock_ns() - t0 < 5000000000ull);
	assert_int_equal(push(chb, "echo", 3), 0);
	assert_int_equal(pop(chb, 3, 5000), 0);
	assert_true(ql_clock_ns() - atomic_load(&spin_t0) >= DEADLINE_NS);
	for (uint32_t i = 4; i < 200; i++) {
		assert_int_equal(push(chb, "echo", i), 0);
		assert_int_equal(pop(chb, i, 5000), 0);
	}

	/* a failed, with the function named; b did not */
	assert_int_equal(ql_daemon_failure(a, fn, sizeof(fn)), -ETIMEDOUT);
	assert_string_equal(fn, "spin");
	ql_daemon_stats(a, &st);
	assert_int_equal(st.failed, -ETIMEDOUT);
	assert_int_equal(st.err_deadline, 1);
	assert_int_equal(st.running, 0);
	assert_int_equal(ql_daemon_failure(b, fn, sizeof(fn)), 0);
	ql_daemon_stats(b, &st);
	assert_int_equal(st.failed, 0);
	assert_int_equal(st.running, 1);
	assert_int_equal(st.ok, 198);
	ql_dispatcher_stats(p, &ps);
	assert_int_equal(ps.abandoned, 1);
	assert_int_equal(ps.daemons, 1);
	assert_int_equal(ps.running, 1);
	/* a is not served again, nor can it be attached */
	assert_int_equal(ql_dispatcher_attach(p, a), -EIO);
	assert_int_equal(ql_daemon_poll(a), -ETIMEDOUT);

	/* the handler returns late: the abandoned thread exits without
	 * answering or touching b */
	atomic_store(&release_spin, 1);
	usleep(20000);
	assert_int_equal(pop(cha, 2, 50), INT32_MIN);
	assert_int_equal(push(chb, "echo", 500), 0);
	assert_int_equal(pop(chb, 500, 5000), 0);
	ql_daemon_stats(b, &st);
	assert_int_equal(st.requests, 199);

	ql_dispatcher_destroy(p);
	ql_daemon_destroy(b);
	ql_channel_destroy(chb);
	/* a's memory stays (quarantined); its channel is not destroyed */
	ql_daemon_destroy(a);
}

/* A stop while a handler hangs returns (once the watchdog claimed it). */
static void test_stop_while_stuck(void **state)
{
	struct ql_dispatcher_config pc = { .cpu = -1, .call_deadline_ns = DEADLINE_NS };
	struct ql_channel *ch;
	struct ql_daemon *d = daemon_with(&ch);
	struct ql_dispatcher *p;
	uint64_t t0;

	(void)state;
	atomic_store(&release_spin, 0);
	assert_int_equal(ql_dispatcher_create(&pc, &p), 0);
	assert_int_equal(ql_dispatcher_attach(p, d), 0);
	assert_int_equal(ql_dispatcher_start(p), 0);
	assert_int_equal(push(ch, "spin", 1), 0);
	usleep(5000);
	t0 = ql_clock_ns();
	assert_int_equal(ql_dispatcher_stop(p), 0);
	assert_true(ql_clock_ns() - t0 < 2000000000ull);
	assert_int_equal(ql_daemon_failure(d, NULL, 0), -ETIMEDOUT);
	/* a restart serves nothing of d, and stops at once */
	assert_int_equal(ql_dispatcher_start(p), 0);
	assert_int_equal(ql_dispatcher_stop(p), 0);
	ql_dispatcher_destroy(p);
	ql_daemon_destroy(d);
	atomic_store(&release_spin, 1);
}

/* Without a deadline configured there is no watchdog thread and nothing
 * changes for handlers that return. */
static void test_no_deadline(void **state)
{
	struct ql_dispatcher_config pc = { .cpu = -1 };
	struct ql_channel *ch;
	struct ql_daemon *d = daemon_with(&ch);
	struct ql_dispatcher *p;

	(void)state;
	pc.call_deadline_ns = 3600000000001ull; /* more than an hour */
	assert_int_equal(ql_dispatcher_create(&pc, &p), -EINVAL);
	pc.call_deadline_ns = 0;
	assert_int_equal(ql_dispatcher_create(&pc, &p), 0);
	assert_int_equal(ql_dispatcher_attach(p, d), 0);
	assert_int_equal(ql_dispatcher_start(p), 0);
	for (uint32_t i = 0; i < 100; i++) {
		assert_int_equal(push(ch, "echo", i), 0);
		assert_int_equal(pop(ch, i, 5000), 0);
	}
	ql_dispatcher_destroy(p);
	ql_daemon_destroy(d);
	ql_channel_destroy(ch);
}

/* A handler writing past its capacity: error status, counted, named in
 * the function's errors; the next request is fine. */
static void test_result_overrun(void **state)
{
	struct ql_channel *ch;
	struct ql_daemon *d = daemon_with(&ch);
	struct ql_daemon_function_stats fs;
	struct ql_daemon_stats st;

	(void)state;
	assert_int_equal(push(ch, "smash", 1), 0);
	assert_int_equal(ql_daemon_poll(d), 1);
	assert_int_equal(pop(ch, 1, 100), QL_RPC_E_INTERNAL);
	assert_int_equal(push(ch, "echo", 2), 0);
	assert_int_equal(ql_daemon_poll(d), 1);
	assert_int_equal(pop(ch, 2, 100), 0);
	ql_daemon_stats(d, &st);
	assert_int_equal(st.err_result_overrun, 1);
	assert_int_equal(st.err_internal, 0);
	assert_int_equal(st.ok, 1);
	assert_int_equal(st.requests, 2);
	for (uint32_t i = 0; i < ql_daemon_function_count(d); i++) {
		assert_int_equal(ql_daemon_function_stats(d, i, &fs), 0);
		if (strcmp(fs.name, "smash"))
			assert_int_equal(fs.result_overruns, 0);
		if (!strcmp(fs.name, "smash")) {
			assert_int_equal(fs.calls, 1);
			assert_int_equal(fs.errors, 1);
			assert_int_equal(fs.result_overruns, 1);
		}
	}
	ql_daemon_destroy(d);
	ql_channel_destroy(ch);
}

/* A handler that dereferences NULL: the process dies of SIGSEGV, and the
 * crash report names the function on stderr first. */
static void test_crash_report(void **state)
{
	int pfd[2], status;
	char out[512] = "";
	size_t used = 0;
	ssize_t n;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		struct ql_dispatcher_config pc = { .cpu = -1 };
		struct ql_dispatcher *p;
		struct ql_channel *ch;
		struct ql_daemon *d;

		dup2(pfd[1], STDERR_FILENO);
		close(pfd[0]);
		d = daemon_with(&ch);
		if (ql_dispatcher_crash_report("faultd") || ql_dispatcher_create(&pc, &p) ||
		    ql_dispatcher_attach(p, d) || ql_dispatcher_start(p) || push(ch, "crash", 1))
			_exit(3);
		sleep(10);
		_exit(4);
	}
	close(pfd[1]);
	while (used < sizeof(out) - 1 && (n = read(pfd[0], out + used, sizeof(out) - 1 - used)) > 0)
		used += (size_t)n;
	out[used] = '\0';
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status))
		fail_msg("child exited %d, stderr: %s", WEXITSTATUS(status), out);
	assert_int_equal(WTERMSIG(status), SIGSEGV);
	if (!strstr(out, "faultd: handler 'crash' crashed with SIGSEGV\n"))
		fail_msg("no crash report naming the function, stderr: %s", out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_result_overrun), cmocka_unit_test(test_no_deadline),
		cmocka_unit_test(test_deadline),       cmocka_unit_test(test_stop_while_stuck),
		cmocka_unit_test(test_crash_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
