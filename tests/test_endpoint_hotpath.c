/* SPDX-License-Identifier: MIT */
/*
 * The endpoint client's hot path: once a write or read endpoint's
 * descriptor is cached, ql_ep_write and ql_ep_read (zero-copy buffers, a
 * read endpoint with no handler) allocate nothing, take no lock (counted by
 * interposition, tests/hotpath.h) and make no system call (run under a
 * seccomp filter that kills the process at the first one). The server is a
 * child process on soft+shm (tests/endpoint_fixture.h). The loop stays
 * within one lap of the ack ring, so it never waits for the server's
 * credit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "endpoint_fixture.h"
#include "hotpath.h"

static const char *dev_srv = "soft+shm://ephp-srv";
static const char *dev_cli = "soft+shm://ephp-cli";
static struct ept_server server;

#define ROUNDS 28 /* 2 + 2 * 28 acks: less than the ring's 64 */

struct hp_arg {
	struct ql_ep_client *c;
	uint8_t *buf;
};

static int setup_client(void *p)
{
	struct hp_arg *a = p;

	if (ql_ep_client_connect(dev_cli, server.addr, &a->c))
		return -1;
	a->buf = ql_ep_client_alloc(a->c, 4096);
	if (!a->buf)
		return -1;
	/* the descriptors, fetched once */
	if (ql_ep_write(a->c, "/data", a->buf, 4096) || ql_ep_read(a->c, "/data", a->buf, 4096))
		return -1;
	return 0;
}

static int loop(void *p)
{
	struct hp_arg *a = p;

	for (int i = 0; i < ROUNDS; i++) {
		a->buf[0] = (uint8_t)i;
		if (ql_ep_write(a->c, "/data", a->buf, 64) || ql_ep_read(a->c, "/data", a->buf, 64))
			return -1;
	}
	return 0;
}

static void test_cached_calls(void **state)
{
	struct hp_arg a = { 0 };
	struct ql_ep_client_stats st;
	char why[256];

	(void)state;
	assert_int_equal(setup_client(&a), 0);
	if (hp_available()) {
		unsigned long allocs, locks;

		hp_begin();
		assert_int_equal(loop(&a), 0);
		hp_end(&allocs, &locks);
		assert_int_equal(allocs, 0);
		assert_int_equal(locks, 0);
	}
	assert_int_equal(ql_ep_client_stats(a.c, &st), 0);
	assert_int_equal(st.requests, 2);
	assert_int_equal(st.bounced, 0);
	ql_ep_client_close(a.c);
	/* the same in a child under seccomp, on a connection of its own */
	memset(&a, 0, sizeof(a));
	if (hp_run_strict(setup_client, loop, &a, why, sizeof(why)))
		fail_msg("%s", why);
}

static int setup(void **state)
{
	(void)state;
	ept_server_start_unix(&server, dev_srv, "ephp", 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return ept_server_stop(&server);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cached_calls),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
