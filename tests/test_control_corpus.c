/* SPDX-License-Identifier: MIT */
/*
 * Replays the control-message fuzz corpus (tests/fuzz/corpus/control)
 * through ql_ctl_parse, so that every CI run exercises the inputs the fuzzer
 * found interesting. File names say what to expect:
 *   ok-*   parses without a secret
 *   mac-*  parses with the test secret "qlink-test-secret" (and fails with another)
 *   bad-*  fails without a secret
 * anything else (fuzzer finds) must merely not crash.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corpus_file.h"

#include "qlink/control.h"

static const uint8_t secret[] = "qlink-test-secret";

static void test_corpus(void **state)
{
	DIR *d = opendir(QL_CORPUS_DIR);
	struct dirent *e;
	int files = 0, ok = 0, mac = 0, bad = 0;
	static uint8_t buf[1 << 16];
	struct ql_ctl_msg m;
	char path[4096];

	assert_non_null(d);
	while ((e = readdir(d))) {
		size_t n;
		int r0, r1, r2;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", QL_CORPUS_DIR, e->d_name);
		n = ql_test_read_file(path, buf, sizeof(buf));
		files++;
		/* Every input, three ways: no secret, the right secret, a wrong one. */
		r0 = ql_ctl_parse(buf, n, NULL, 0, &m);
		r1 = ql_ctl_parse(buf, n, secret, sizeof(secret) - 1, &m);
		if (!r1 && !m.mac_ok)
			fail_msg("%s: parsed with a secret but mac_ok unset", e->d_name);
		r2 = ql_ctl_parse(buf, n, (const uint8_t *)"x", 1, &m);
		if (!strncmp(e->d_name, "ok-", 3)) {
			if (r0)
				fail_msg("%s: %d", e->d_name, r0);
			ok++;
		} else if (!strncmp(e->d_name, "mac-", 4)) {
			if (r1)
				fail_msg("%s: %d", e->d_name, r1);
			assert_int_equal(r2, -EACCES);
			mac++;
		} else if (!strncmp(e->d_name, "bad-", 4)) {
			if (!r0)
				fail_msg("%s parsed but should not", e->d_name);
			bad++;
		}
		/* A message that parses re-encodes, and the encoding parses to the same. */
		if (!r0 && ql_ctl_parse(buf, n, NULL, 0, &m) == 0) {
			uint8_t out[QL_CTL_MAX_DGRAM];
			struct ql_ctl_msg m2;
			int l = ql_ctl_format(&m, NULL, 0, out, sizeof(out));

			if (l > 0) {
				assert_int_equal(ql_ctl_parse(out, (size_t)l, NULL, 0, &m2), 0);
				assert_int_equal(m2.type, m.type);
				assert_int_equal(m2.session, m.session);
				assert_int_equal(m2.seq, m.seq);
			}
		}
	}
	closedir(d);
	print_message("corpus: %d files (%d ok, %d mac, %d bad)\n", files, ok, mac, bad);
	assert_true(ok >= 10);
	assert_true(mac >= 3);
	assert_true(bad >= 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_corpus) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
