/* SPDX-License-Identifier: MIT */
/*
 * Hostile peer strings in the logs: ql_log() escapes what it prints, so a
 * peer-chosen name or reason can forge no log line (CR, LF), no terminal
 * control sequence and no quote or backslash that would end a field early;
 * and the control parser refuses DISCOVER names outside a plain alphabet, so
 * they cannot forge key=value pairs in qlinkd's text or JSON lines.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "capture_stderr.h"

#include "qlink/control.h"
#include "qlink/log.h"

/* Run ql_log with stderr captured; returns what was written. */
static char *capture(const char *hostile)
{
	static char out[8192];
	struct capture_stderr c;

	capture_stderr_begin(&c);
	ql_log_warn("control", "session from %s: %s", "127.0.0.1:9", hostile);
	return capture_stderr_end(&c, out, sizeof(out));
}

static void test_log_no_forged_lines(void **state)
{
	static const char *const hostile[] = {
		"x\nqlink error [daemon] forged line",
		"x\r\nqlink error [daemon] forged line",
		"x\rqlink error [daemon] overwritten",
		"\x1b[2J\x1b[1;1Hscreen cleared",
		"tab\there \x01\x02\x7f",
		"quote\" \"key\":\"forged\"",
		"backslash\\\" end",
	};

	ql_log_set_level(QL_LOG_WARN);
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		char *line = capture(hostile[i]);
		size_t len = strlen(line);

		/* exactly one line, ending in its only newline */
		assert_true(len > 0);
		assert_int_equal(line[len - 1], '\n');
		assert_null(memchr(line, '\n', len - 1));
		for (size_t k = 0; k < len - 1; k++) {
			unsigned char c = (unsigned char)line[k];

			if (c < 0x20 || c == 0x7f)
				fail_msg("control byte 0x%02x in log line %zu: %s", c, i, line);
		}
		/* every quote is escaped */
		for (char *q = strchr(line, '"'); q; q = strchr(q + 1, '"'))
			assert_true(q > line && q[-1] == '\\');
		assert_non_null(strstr(line, "qlink warn [control] session from 127.0.0.1:9: "));
	}
}

static void test_log_escape_bounds(void **state)
{
	char out[8];

	/* Truncation never splits an escape. */
	assert_int_equal(ql_log_escape(out, sizeof(out), "ab\n\n\n"), 6);
	assert_string_equal(out, "ab\\n\\n");
	assert_int_equal(ql_log_escape(out, sizeof(out), "abcde\x01"), 5);
	assert_string_equal(out, "abcde");
	assert_int_equal(ql_log_escape(out, 1, "x"), 0);
	assert_string_equal(out, "");
}

/* A DISCOVER whose name could forge a key in qlinkd's "qcs=NAME" pairs (a
 * blank, '=', a quote, a newline) is refused as malformed. */
static void test_discover_name_alphabet(void **state)
{
	static const char *const names[] = { "a b",   "a=b",	   "a\\\"b",
					     "a\\nb", "a\\u0000b", "a\\u001bb" };
	char d[512];
	struct ql_ctl_msg m;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int n = snprintf(d, sizeof(d),
				 "{\"v\":2,\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":1,"
				 "\"name\":\"%s\"}",
				 names[i]);

		assert_int_equal(ql_ctl_parse((const uint8_t *)d, (size_t)n, NULL, 0, &m),
				 -EBADMSG);
	}
	snprintf(d, sizeof(d),
		 "{\"v\":2,\"type\":\"DISCOVER\",\"session\":\"aa\",\"seq\":1,"
		 "\"name\":\"qcs-0.lab@rack:3_b\"}");
	assert_int_equal(ql_ctl_parse((const uint8_t *)d, strlen(d), NULL, 0, &m), 0);
	assert_string_equal(m.name, "qcs-0.lab@rack:3_b");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_no_forged_lines),
		cmocka_unit_test(test_log_escape_bounds),
		cmocka_unit_test(test_discover_name_alphabet),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
