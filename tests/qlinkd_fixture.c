/* SPDX-License-Identifier: MIT */
/* qlinkd fixture: see qlinkd_fixture.h. */
#define _GNU_SOURCE
#include "qlinkd_fixture.h"
#include "free_port.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "demo/demo.h"
#include "qlink/clock.h"
#include "qlink/control.h"
#include "qlink/ring.h"
#include "qlink/rpc.h"

#ifndef QL_TEST_QLINKD
#error "QL_TEST_QLINKD (the qlinkd binary) must be defined by the build"
#endif

static int runs;

char *qlinkd_read_file(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

int qlinkd_wait_log(const char *path, const char *what, unsigned ms)
{
	uint64_t t0 = ql_clock_ns();

	while (!strstr(qlinkd_read_file(path), what)) {
		if (ql_clock_ns() - t0 > (uint64_t)ms * 1000000)
			return -1;
		usleep(20000);
	}
	return 0;
}

int qlinkd_fixture_init(struct qlinkd_fixture *f, const char *tag)
{
	memset(f, 0, sizeof(*f));
	f->pid = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/qlink-test-%s-XXXXXX", tag);
	if (!mkdtemp(f->dir))
		return -1;
	f->run = ++runs;
	/* the control port: free now (tests/free_port.h), never a fixed one */
	f->port = ql_test_free_ports(1);
	if (f->port < 0)
		return -1;
	snprintf(f->cfg, sizeof(f->cfg), "%s/qlinkd.yaml", f->dir);
	snprintf(f->errlog, sizeof(f->errlog), "%s/qlinkd.err", f->dir);
	snprintf(f->outlog, sizeof(f->outlog), "%s/qlinkd.out", f->dir);
	return 0;
}

int qlinkd_fixture_write_config(struct qlinkd_fixture *f, const char *fmt, ...)
{
	FILE *out = fopen(f->cfg, "w");
	va_list ap;
	int n;

	if (!out)
		return -1;
	va_start(ap, fmt);
	n = vfprintf(out, fmt, ap);
	va_end(ap);
	return fclose(out) || n < 0 ? -1 : 0;
}

int qlinkd_fixture_start(struct qlinkd_fixture *f)
{
	fflush(NULL);
	f->pid = fork();
	if (f->pid < 0)
		return -1;
	if (f->pid == 0) {
		if (!freopen(f->errlog, "w", stderr) || !freopen(f->outlog, "w", stdout))
			_exit(127);
		alarm(60); /* survives exec: a stuck qlinkd cannot outlive the test */
		execl(QL_TEST_QLINKD, "qlinkd", "--config", f->cfg, (char *)NULL);
		_exit(127);
	}
	return qlinkd_wait_log(f->errlog, "listening", 10000);
}

int qlinkd_fixture_end(struct qlinkd_fixture *f, int sig, unsigned ms, uint64_t *took_ns)
{
	uint64_t t0 = ql_clock_ns();
	int st = 0;
	pid_t r;

	if (f->pid <= 0)
		return -1;
	if (sig)
		kill(f->pid, sig);
	while ((r = waitpid(f->pid, &st, WNOHANG)) == 0) {
		if (ql_clock_ns() - t0 > (uint64_t)ms * 1000000) {
			kill(f->pid, SIGKILL);
			waitpid(f->pid, &st, 0);
			fprintf(stderr, "qlinkd did not stop in %u ms:\n%s\n", ms,
				qlinkd_read_file(f->errlog));
			f->pid = -1;
			return -1;
		}
		usleep(10000);
	}
	if (took_ns)
		*took_ns = ql_clock_ns() - t0;
	f->pid = -1;
	if (r < 0)
		return -1;
	/* a clean stop (and, under ASan, no leak or error report) */
	if (WIFEXITED(st) && WEXITSTATUS(st))
		fprintf(stderr, "qlinkd exited %d:\n%s\n", WEXITSTATUS(st),
			qlinkd_read_file(f->errlog));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int qlinkd_fixture_cleanup(struct qlinkd_fixture *f)
{
	char cmd[128];

	if (!f->dir[0])
		return 0;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd)) {
		fprintf(stderr, "cannot remove %s\n", f->dir);
		return -1;
	}
	return 0;
}

int qlinkd_fixture_teardown(struct qlinkd_fixture *f)
{
	int ret = 0;

	if (f->pid > 0 && qlinkd_fixture_end(f, SIGTERM, 10000, NULL) != 0)
		ret = -1;
	if (qlinkd_fixture_cleanup(f))
		ret = -1;
	return ret;
}

void qlinkd_qcs_open(struct qlinkd_qcs *q, int port, const char *name, const char *uri)
{
	struct ql_ctl_client_config cc = { .name = name };
	struct ql_conn_params sp, cp;
	char hp[64];

	memset(q, 0, sizeof(*q));
	snprintf(hp, sizeof(hp), "127.0.0.1:%d", port);
	assert_int_equal(ql_ctl_client_create(hp, NULL, 0, &cc, &q->ctl), 0);
	assert_int_equal(ql_ctl_client_discover(q->ctl, 1, &sp), 0);
	q->qp_type = sp.qp_type;
	assert_int_equal(ql_device_open(uri, &q->dev), 0);
	assert_int_equal(ql_ring_client_create(q->dev, &sp, NULL, &q->cl), 0);
	assert_int_equal(ql_ring_client_local_params(q->cl, &cp), 0);
	assert_int_equal(ql_ring_client_connect(q->cl, &sp, NULL), 0);
	assert_int_equal(ql_ctl_client_ack(q->ctl, &cp, 1), 0);
	assert_int_equal(ql_ctl_client_start(q->ctl), 0);
}

void qlinkd_qcs_drop(struct qlinkd_qcs *q)
{
	ql_ring_client_destroy(q->cl);
	ql_device_close(q->dev);
	ql_ctl_client_destroy(q->ctl);
}

void qlinkd_qcs_close(struct qlinkd_qcs *q)
{
	ql_ctl_client_complete(q->ctl);
	qlinkd_qcs_drop(q);
}

void qlinkd_qcs_send(struct qlinkd_qcs *q, const char *fn)
{
	uint8_t msg[128], syn[QL_DEMO_PARITY_ARG_LEN];
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = ql_rpc_fnv1a(fn),
		.arg_len = sizeof(syn),
		.request_id = q->next++,
	};

	ql_demo_parity_syndrome(1, h.request_id, syn);
	ql_rpc_header_encode(msg, &h);
	memcpy(msg + QL_RPC_HEADER_SIZE, syn, sizeof(syn));
	assert_int_equal(ql_ring_client_send(q->cl, msg, QL_RPC_HEADER_SIZE + sizeof(syn)), 0);
}

int qlinkd_qcs_wait(struct qlinkd_qcs *q, unsigned ms, int32_t *status, uint32_t *len)
{
	uint64_t t0 = ql_clock_ns();
	struct ql_ring_response r;
	int n;

	while ((n = ql_ring_client_poll(q->cl, &r, 1)) == 0)
		if (ql_clock_ns() - t0 > (uint64_t)ms * 1000000)
			return 0;
	assert_int_equal(n, 1);
	assert_non_null(r.msg); /* never given up */
	assert_true(r.len >= QL_RPC_RESPONSE_SIZE);
	q->id = ql_rpc_get_u32(r.msg + 12);
	if (status)
		*status = ql_rpc_get_i32(r.msg + 4);
	if (len)
		*len = r.len;
	assert_int_equal(ql_ring_client_release(q->cl, &r), 0);
	return 1;
}

void qlinkd_qcs_calls(struct qlinkd_qcs *q, int n)
{
	int32_t status;
	uint32_t len;

	for (int i = 0; i < n; i++) {
		qlinkd_qcs_send(q, QL_DEMO_PARITY_NAME);
		assert_int_equal(qlinkd_qcs_wait(q, 5000, &status, &len), 1);
		assert_int_equal(q->id, q->next - 1);
		assert_int_equal(status, 0);
		assert_int_equal(len, QL_RPC_RESPONSE_SIZE + 5);
	}
	ql_ctl_client_keepalive(q->ctl);
}

long qlinkd_qcs_status(struct qlinkd_qcs *q, const char *key)
{
	char json[QL_CTL_STATUS_MAX], pat[64];
	const char *p;

	assert_int_equal(ql_ctl_client_status(q->ctl, json, sizeof(json)), 0);
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(json, pat);
	assert_non_null(p);
	return atol(p + strlen(pat));
}
