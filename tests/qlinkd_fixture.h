/* SPDX-License-Identifier: MIT */
/*
 * qlinkd fixture: the set-up shared by the tests that run a qlinkd child and
 * play its QCSs from this process (tests/test_qlinkd_*.c). It writes a
 * config into a fresh temp dir, starts `qlinkd --config` with stderr and
 * stdout captured in that dir, waits for a log line, ends qlinkd within a
 * bound, and opens a QCS (control client + ring client over soft+shm) that
 * sends calls and reads their responses. Every wait is bounded.
 */
#ifndef QL_TEST_QLINKD_FIXTURE_H
#define QL_TEST_QLINKD_FIXTURE_H

#include <stdint.h>
#include <sys/types.h>

struct qlinkd_fixture {
	char dir[64];
	char cfg[128];
	char errlog[128]; /* qlinkd's stderr */
	char outlog[128]; /* qlinkd's stdout */
	int port;	  /* its control port, free when picked (tests/free_port.h) */
	int run;	  /* how many qlinkds this process started, this one included */
	pid_t pid;	  /* -1 when none runs */
};

/* A QCS of the qlinkd: its control client and its ring client. */
struct qlinkd_qcs {
	struct ql_ctl_client *ctl;
	struct ql_device *dev;
	struct ql_ring_client *cl;
	uint32_t next; /* the next request id */
	uint32_t id;   /* the request id of the last response qlinkd_qcs_wait read */
	int qp_type;   /* the QP type CONNECTION_PARAMS named (enum ibv_qp_type) */
};

/* Make the temp dir /tmp/qlink-test-<tag>-XXXXXX and name the files in it;
 * pick the port. 0 or -1. */
int qlinkd_fixture_init(struct qlinkd_fixture *f, const char *tag);
/* Write config text (printf format) to f->cfg. 0 or -1. */
int qlinkd_fixture_write_config(struct qlinkd_fixture *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Start qlinkd on f->cfg and wait up to 10 s for "listening". 0 or -1. */
int qlinkd_fixture_start(struct qlinkd_fixture *f);
/* Send sig (0: none) and wait up to ms for qlinkd to end: its exit status,
 * 128 + signal, or -1 (killed after ms). took_ns (may be NULL): how long. */
int qlinkd_fixture_end(struct qlinkd_fixture *f, int sig, unsigned ms, uint64_t *took_ns);
/* Remove the temp dir. 0 or -1. */
int qlinkd_fixture_cleanup(struct qlinkd_fixture *f);
/* A group teardown: end a qlinkd still running (SIGTERM, 10 s) and remove
 * the temp dir. 0, or -1 if either failed. cmocka's exit status ignores a
 * teardown's failure: a test that needs qlinkd's exit 0 asserts
 * qlinkd_fixture_end itself. */
int qlinkd_fixture_teardown(struct qlinkd_fixture *f);

/* The text of a file (a log) so far; a static buffer. */
char *qlinkd_read_file(const char *path);
/* Wait up to ms for what to appear in the file at path. 0 or -1. */
int qlinkd_wait_log(const char *path, const char *what, unsigned ms);

/* Open a QCS named name on the qlinkd at port, its own device uri:
 * discover, ring client, ACK, START (cmocka assertions). */
void qlinkd_qcs_open(struct qlinkd_qcs *q, int port, const char *name, const char *uri);
/* COMPLETE and close. */
void qlinkd_qcs_close(struct qlinkd_qcs *q);
/* Close without COMPLETE (a QCS the daemon has dropped). */
void qlinkd_qcs_drop(struct qlinkd_qcs *q);
/* Send a call to fn, a parity syndrome as its arguments. */
void qlinkd_qcs_send(struct qlinkd_qcs *q, const char *fn);
/* Wait up to ms for the response to the oldest call: 1 with its status and
 * length (either may be NULL) and its request id in q->id, 0 if none came.
 * A call given up (UC, msg NULL) fails the test. */
int qlinkd_qcs_wait(struct qlinkd_qcs *q, unsigned ms, int32_t *status, uint32_t *len);
/* n parity calls, each answered within 5 s with its own request id, status 0
 * and its 5-byte result; then a keepalive. */
void qlinkd_qcs_calls(struct qlinkd_qcs *q, int n);
/* The number after "key": in a STATUS_REPLY (asserted present). */
long qlinkd_qcs_status(struct qlinkd_qcs *q, const char *key);

#endif
