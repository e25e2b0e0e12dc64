/* SPDX-License-Identifier: MIT */
/*
 * Replays the data-plane fuzz corpus (tests/fuzz/corpus/rpc_ring) through
 * the fuzz harness (tests/fuzz/rpc_ring_harness.c: a hostile QCS's ring
 * slots collected by ql_rx_ring_burst and answered by ql_rpc_dispatch, every
 * guarantee checked), built by the project's compiler, so that every CI run
 * and the coverage build exercise what the fuzzer found interesting. A
 * file's name says what its requests must come to:
 *   KIND-*   every request collected is answered with that ql_rpc_err_kind
 *            (none, short, bad_magic, bad_length, unknown_function, ...),
 *            and there is at least one;
 *   mixed-*  at least three different kinds, nothing lost;
 *   idle-*   nothing is collected (no slot marked ready as expected);
 * anything else (fuzzer finds) must merely hold the guarantees.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corpus_file.h"

#include "fuzz/rpc_ring_harness.h"

/* The ql_rpc_err_kind a name starts with, or -1. */
static int name_kind(const char *name)
{
	for (int k = 0; k < QL_RPC_ERR_KIND_COUNT; k++) {
		const char *s = ql_rpc_err_kind_str((enum ql_rpc_err_kind)k);
		size_t n = strlen(s);

		if (!strncmp(name, s, n) && name[n] == '-')
			return k;
	}
	return -1;
}

static void test_corpus(void **state)
{
	DIR *d = opendir(QL_CORPUS_DIR);
	static uint8_t buf[1 << 16];
	int files = 0, named = 0, seen_kinds = 0;
	unsigned int kinds_total[QL_RPC_ERR_KIND_COUNT] = { 0 };
	struct dirent *e;
	char path[4096];

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		struct qlf_rpc_ring_stats st;
		size_t n;
		int kind;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", QL_CORPUS_DIR, e->d_name);
		n = ql_test_read_file(path, buf, sizeof(buf));
		files++;
		qlf_rpc_ring_one(buf, n, &st);
		for (int k = 0; k < QL_RPC_ERR_KIND_COUNT; k++)
			kinds_total[k] += st.by_kind[k];

		kind = name_kind(e->d_name);
		if (kind >= 0) {
			named++;
			if (!st.requests || st.by_kind[kind] != st.requests)
				fail_msg("%s: %u requests, %u of them %s", e->d_name, st.requests,
					 st.by_kind[kind],
					 ql_rpc_err_kind_str((enum ql_rpc_err_kind)kind));
		} else if (!strncmp(e->d_name, "mixed-", 6)) {
			int distinct = 0;

			named++;
			for (int k = 0; k < QL_RPC_ERR_KIND_COUNT; k++)
				distinct += st.by_kind[k] > 0;
			if (distinct < 3)
				fail_msg("%s: %d kinds of answer", e->d_name, distinct);
		} else if (!strncmp(e->d_name, "idle-", 5)) {
			named++;
			if (st.requests)
				fail_msg("%s: %u requests collected from an idle ring", e->d_name,
					 st.requests);
		}
	}
	closedir(d);
	for (int k = 0; k < QL_RPC_ERR_KIND_COUNT; k++)
		seen_kinds += kinds_total[k] > 0;
	printf("rpc_ring corpus: %d files (%d with an expectation), %d of %d answer kinds\n", files,
	       named, seen_kinds, QL_RPC_ERR_KIND_COUNT);
	assert_true(named >= 30);
	/* the seeds reach every way a request can be answered */
	assert_int_equal(seen_kinds, QL_RPC_ERR_KIND_COUNT);
}

/* The harness itself can fail: a too-short input is refused, and a ring
 * whose slot says more than it holds is cut to the slot (checked inside). */
static void test_harness_inputs(void **state)
{
	struct qlf_rpc_ring_stats st;
	static const uint8_t one[1] = { 0 };

	(void)state;
	assert_int_equal(qlf_rpc_ring_one(one, 0, &st), -1);
	assert_int_equal(qlf_rpc_ring_one(one, 1, &st), -1);
	assert_int_equal(st.requests, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_corpus),
		cmocka_unit_test(test_harness_inputs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
