/* SPDX-License-Identifier: MIT */
/*
 * qlinkd's log lines (src/qlinkd/log.c) with hostile values: quotes,
 * backslashes, newlines, terminal escapes, bytes that are not UTF-8, '='
 * and blanks, in the message, the component and the fields. JSON: every
 * line is one object jansson parses, each string field reads back as
 * written (U+FFFD for a byte that is not UTF-8), numbers are numbers and a
 * version "1.0" stays a string. Text: every value reads back exactly
 * (quoted and escaped once). The library's ql_log() lines come out in the
 * same format (ql_log_set_sink).
 */
#define _GNU_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>

#include "capture_stderr.h"

#include "qlinkd/qlinkd_int.h"

static const char *const hostile[] = {
	"plain",
	"a \"quoted\" value",
	"x\nqlink error [daemon] forged line",
	"cr\rlf",
	"\x1b[2J\x01\x7f",
	"key\":\"forged\",\"x\":\"",
	"back\\slash\\\"",
	"k=v other=w",
	"caf\xc3\xa9 \xe2\x82\xac",
	"",
};

/* What a JSON reader must get back for s: a byte that is not UTF-8 becomes
 * U+FFFD (none of the strings above has one; see test_json_invalid_utf8). */
static char *run(void (*fn)(FILE *, const char *), const char *s)
{
	static char buf[8192];
	FILE *f = tmpfile();
	size_t n;

	assert_non_null(f);
	fn(f, s);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static void one_line(const char *line)
{
	size_t len = strlen(line);

	assert_true(len > 0);
	assert_int_equal(line[len - 1], '\n');
	assert_null(memchr(line, '\n', len - 1));
	for (size_t i = 0; i + 1 < len; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			fail_msg("raw control byte 0x%02x in %s", (unsigned char)line[i], line);
}

static void line_fields(FILE *f, const char *s)
{
	qlinkd_log_fields(f, false, QL_LOG_WARN, s[0] ? s : "comp", s,
			  QL_FIELDS(QS("error", s), QU("session", 7), QS("version", "1.0"),
				    QX32("id", 0x191b6322), QI("cpu", -1)));
}

static void test_json_hostile(void **state)
{
	(void)state;
	qlinkd_log_config(QL_LOG_INFO, QL_LOG_FORMAT_JSON);
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		char *line = run(line_fields, hostile[i]);
		json_error_t err;
		json_t *o;

		one_line(line);
		o = json_loads(line, 0, &err);
		if (!o)
			fail_msg("not JSON (%s): %s", err.text, line);
		assert_true(json_is_object(o));
		assert_string_equal(json_string_value(json_object_get(o, "msg")), hostile[i]);
		assert_string_equal(json_string_value(json_object_get(o, "error")), hostile[i]);
		assert_string_equal(json_string_value(json_object_get(o, "level")), "warn");
		assert_true(json_is_integer(json_object_get(o, "session")));
		assert_int_equal(json_integer_value(json_object_get(o, "session")), 7);
		assert_string_equal(json_string_value(json_object_get(o, "version")), "1.0");
		assert_string_equal(json_string_value(json_object_get(o, "id")), "0x191b6322");
		assert_int_equal(json_integer_value(json_object_get(o, "cpu")), -1);
		assert_null(json_object_get(o, "x")); /* nothing forged */
		json_decref(o);
	}
}

static void line_bad_utf8(FILE *f, const char *s)
{
	qlinkd_log_fields(f, false, QL_LOG_WARN, "plugin", "m", QL_FIELDS(QS("v", s)));
}

static void test_json_invalid_utf8(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "a\xff"
		  "b",
		  "a\xef\xbf\xbd"
		  "b" },
		{ "\xc3", "\xef\xbf\xbd" },				    /* cut sequence */
		{ "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" },		    /* overlong '/' */
		{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* surrogate */
		{ "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80" },		    /* valid */
	};

	(void)state;
	qlinkd_log_config(QL_LOG_INFO, QL_LOG_FORMAT_JSON);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *line = run(line_bad_utf8, cases[i].in);
		json_error_t err;
		json_t *o = json_loads(line, 0, &err);

		if (!o)
			fail_msg("not JSON (%s): %s", err.text, line);
		assert_string_equal(json_string_value(json_object_get(o, "v")), cases[i].out);
		json_decref(o);
	}
}

/* ---- text: read back ---------------------------------------------------------- */

/* The value at *p (bare, or quoted with \\ \" \n \r \t \xHH): into out. */
static const char *text_value(const char *p, char *out)
{
	if (*p != '"') {
		size_t n = strcspn(p, " \n");

		memcpy(out, p, n);
		out[n] = 0;
		return p + n;
	}
	for (p++; *p != '"'; p++) {
		assert_true(*p != 0 && *p != '\n');
		if (*p != '\\') {
			*out++ = *p;
			continue;
		}
		p++;
		switch (*p) {
		case 'n':
			*out++ = '\n';
			break;
		case 'r':
			*out++ = '\r';
			break;
		case 't':
			*out++ = '\t';
			break;
		case 'x': {
			char hx[3] = { p[1], p[2], 0 };

			*out++ = (char)strtol(hx, NULL, 16);
			p += 2;
			break;
		}
		default:
			assert_true(*p == '\\' || *p == '"');
			*out++ = *p;
		}
	}
	*out = 0;
	return p + 1;
}

static void test_text_round_trip(void **state)
{
	(void)state;
	qlinkd_log_config(QL_LOG_INFO, QL_LOG_FORMAT_TEXT);
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		char *line = run(line_fields, hostile[i]), v[1024];
		const char *p;

		one_line(line);
		/* TS LEVEL COMPONENT MESSAGE error=... */
		p = strchr(line, ' ');
		assert_non_null(p);
		assert_memory_equal(p, " warn ", 6);
		p = text_value(p + 6, v); /* component */
		assert_string_equal(v, hostile[i][0] ? hostile[i] : "comp");
		assert_int_equal(*p, ' ');
		p = text_value(p + 1, v);
		assert_string_equal(v, hostile[i]);
		assert_memory_equal(p, " error=", 7);
		p = text_value(p + 7, v);
		assert_string_equal(v, hostile[i]);
		assert_string_equal(p, " session=7 version=1.0 id=0x191b6322 cpu=-1\n");
	}
}

/* ---- the library's lines ------------------------------------------------------ */

static void test_library_lines(void **state)
{
	char buf[4096];
	struct capture_stderr c;
	json_error_t err;
	json_t *o;

	(void)state;
	qlinkd_log_config(QL_LOG_INFO, QL_LOG_FORMAT_JSON);
	ql_log_set_level(QL_LOG_INFO);
	capture_stderr_begin(&c);
	ql_log_warn("verbs", "device \"%s\" gone\n", "x y");
	ql_log_debug("verbs", "below the level: not written");
	capture_stderr_end(&c, buf, sizeof(buf));
	ql_log_set_sink(NULL, NULL);
	one_line(buf);
	o = json_loads(buf, 0, &err);
	if (!o)
		fail_msg("not JSON (%s): %s", err.text, buf);
	assert_string_equal(json_string_value(json_object_get(o, "component")), "verbs");
	assert_string_equal(json_string_value(json_object_get(o, "msg")), "device \"x y\" gone\n");
	assert_string_equal(json_string_value(json_object_get(o, "source")), "libqlink");
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_hostile),
		cmocka_unit_test(test_json_invalid_utf8),
		cmocka_unit_test(test_text_round_trip),
		cmocka_unit_test(test_library_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
