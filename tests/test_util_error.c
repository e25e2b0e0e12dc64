/* SPDX-License-Identifier: MIT */
/* Error text and the thread-local detail sentence (qlink/error.h). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "qlink/error.h"

static void test_strerror(void **state)
{
	/* Negative and positive errnos read the same; never NULL. */
	assert_string_equal(ql_strerror(-EINVAL), strerror(EINVAL));
	assert_string_equal(ql_strerror(EINVAL), strerror(EINVAL));
	assert_string_equal(ql_strerror(-ENOMEM), strerror(ENOMEM));
	assert_string_equal(ql_strerror(0), "success");
	/* qlink's own wording where the libc one would mislead. */
	assert_string_equal(ql_strerror(-EPROTONOSUPPORT), "device URI scheme not supported");
	assert_string_equal(ql_strerror(-EOVERFLOW), "completion queue overrun");
	assert_non_null(ql_strerror(-123456));
	assert_true(strlen(ql_strerror(-123456)) > 0);
}

static void test_detail_set_and_clear(void **state)
{
	ql_error_clear();
	assert_string_equal(ql_error_detail(), "");
	/* ql_error_set returns its errno so error paths can `return` it. */
	assert_int_equal(ql_error_set(-EINVAL, "bad uri '%s' (limit %d)", "soft://x", 64), -EINVAL);
	assert_string_equal(ql_error_detail(), "bad uri 'soft://x' (limit 64)");
	assert_int_equal(ql_error_set(-EBUSY, "second"), -EBUSY);
	assert_string_equal(ql_error_detail(), "second");
	ql_error_clear();
	assert_string_equal(ql_error_detail(), "");
}

static void test_detail_truncates(void **state)
{
	char big[4096];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ql_error_set(-E2BIG, "%s", big);
	/* Truncated, terminated, and a prefix of what was asked for. */
	assert_true(strlen(ql_error_detail()) > 0);
	assert_true(strlen(ql_error_detail()) < sizeof(big) - 1);
	assert_memory_equal(ql_error_detail(), big, strlen(ql_error_detail()));
	ql_error_clear();
}

struct peer {
	char seen_at_start[64];
	char seen_after_set[64];
};

static void *peer_thread(void *arg)
{
	struct peer *p = arg;

	snprintf(p->seen_at_start, sizeof(p->seen_at_start), "%s", ql_error_detail());
	ql_error_set(-EIO, "from the peer thread");
	snprintf(p->seen_after_set, sizeof(p->seen_after_set), "%s", ql_error_detail());
	return NULL;
}

static void test_detail_thread_local(void **state)
{
	struct peer p;
	pthread_t t;

	memset(&p, 0, sizeof(p));
	ql_error_set(-EINVAL, "from the main thread");
	assert_int_equal(pthread_create(&t, NULL, peer_thread, &p), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* The peer did not see ours, and we do not see the peer's. */
	assert_string_equal(p.seen_at_start, "");
	assert_string_equal(p.seen_after_set, "from the peer thread");
	assert_string_equal(ql_error_detail(), "from the main thread");
	ql_error_clear();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strerror),
		cmocka_unit_test(test_detail_set_and_clear),
		cmocka_unit_test(test_detail_truncates),
		cmocka_unit_test(test_detail_thread_local),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
