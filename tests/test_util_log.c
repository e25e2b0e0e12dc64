/* SPDX-License-Identifier: MIT */
/*
 * ql_log: the threshold from QLINK_LOG (each value, an unknown one, none)
 * and from ql_log_set_level, the line format on stderr, lines above the
 * threshold dropped, and an overlong message cut rather than overrun. The
 * level is read from the environment once per process, so each case runs
 * in a child with its stderr on a pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink/log.h"

/* Run fn in a child with QLINK_LOG=env (NULL: unset); its stderr into out,
 * its exit status returned. */
static int in_child(const char *env, void (*fn)(void), char *out, size_t cap)
{
	int fd[2], status, level;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	assert_int_equal(pipe(fd), 0);
	fflush(stdout); /* the child's exit() flushes its copy */
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fd[0]);
		dup2(fd[1], 2);
		if (env)
			setenv("QLINK_LOG", env, 1);
		else
			unsetenv("QLINK_LOG");
		fn();
		/* exit, not _exit: a coverage build writes its counters at exit,
		 * and may say things on stderr then, which are not the test's */
		level = (int)ql_log_get_level();
		fflush(stderr);
		dup2(open("/dev/null", O_WRONLY), 2);
		exit(level);
	}
	close(fd[1]);
	while (got + 1 < cap && (n = read(fd[0], out + got, cap - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void log_each(void)
{
	ql_log_error("util", "e %d", 1);
	ql_log_warn("util", "w %s", "two");
	ql_log_info("util", "i");
	ql_log_debug("util", "d");
}

static void nothing(void)
{
}

static void test_env_levels(void **state)
{
	static const struct {
		const char *env;
		int level;
		const char *lines;
	} cases[] = {
		{ NULL, QL_LOG_WARN, "qlink error [util] e 1\nqlink warn [util] w two\n" },
		{ "error", QL_LOG_ERROR, "qlink error [util] e 1\n" },
		{ "warn", QL_LOG_WARN, "qlink error [util] e 1\nqlink warn [util] w two\n" },
		{ "info", QL_LOG_INFO,
		  "qlink error [util] e 1\nqlink warn [util] w two\nqlink info [util] i\n" },
		{ "debug", QL_LOG_DEBUG,
		  "qlink error [util] e 1\nqlink warn [util] w two\nqlink info [util] i\n"
		  "qlink debug [util] d\n" },
		/* unknown values, and case matters: the default */
		{ "verbose", QL_LOG_WARN, "qlink error [util] e 1\nqlink warn [util] w two\n" },
		{ "DEBUG", QL_LOG_WARN, "qlink error [util] e 1\nqlink warn [util] w two\n" },
		{ "", QL_LOG_WARN, "qlink error [util] e 1\nqlink warn [util] w two\n" },
	};
	char out[4096];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int level = in_child(cases[i].env, log_each, out, sizeof(out));

		if (level != cases[i].level || strcmp(out, cases[i].lines))
			fail_msg("QLINK_LOG=%s: level %d (expected %d), output:\n%s",
				 cases[i].env ? cases[i].env : "(unset)", level, cases[i].level,
				 out);
	}
	/* nothing logged, nothing written */
	assert_int_equal(in_child("debug", nothing, out, sizeof(out)), QL_LOG_DEBUG);
	assert_string_equal(out, "");
}

static void set_error_then_log(void)
{
	ql_log_set_level(QL_LOG_ERROR);
	log_each();
}

static void set_debug_then_log(void)
{
	ql_log_set_level(QL_LOG_DEBUG);
	ql_log_debug("ctl", "now %s", "visible");
}

static void test_set_level_wins(void **state)
{
	char out[4096];

	(void)state;
	/* ql_log_set_level overrides the environment, either way */
	assert_int_equal(in_child("debug", set_error_then_log, out, sizeof(out)), QL_LOG_ERROR);
	assert_string_equal(out, "qlink error [util] e 1\n");
	assert_int_equal(in_child("error", set_debug_then_log, out, sizeof(out)), QL_LOG_DEBUG);
	assert_string_equal(out, "qlink debug [ctl] now visible\n");
}

static void log_long(void)
{
	static char big[5000];

	memset(big, 'x', sizeof(big) - 1);
	ql_log_error("util", "%s", big);
}

static void test_long_message_cut(void **state)
{
	char out[8192];
	size_t n;

	(void)state;
	in_child(NULL, log_long, out, sizeof(out));
	n = strlen(out);
	/* "qlink error [util] " + 1023 bytes of the message + "\n" */
	assert_int_equal(n, strlen("qlink error [util] ") + 1023 + 1);
	assert_int_equal(out[n - 1], '\n');
	assert_int_equal(out[n - 2], 'x');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_levels),
		cmocka_unit_test(test_set_level_wins),
		cmocka_unit_test(test_long_message_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
