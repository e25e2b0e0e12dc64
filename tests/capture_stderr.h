/* SPDX-License-Identifier: MIT */
/*
 * capture_stderr: what code under test writes to file descriptor 2 (the
 * library's ql_log lines, qlinkd's log), read back as a string. Between
 * capture_stderr_begin and capture_stderr_end, fd 2 is a temporary file;
 * end restores it and copies what was written (cut to len - 1 bytes,
 * NUL-terminated) into buf. Include after <cmocka.h>.
 */
#ifndef QL_TEST_CAPTURE_STDERR_H
#define QL_TEST_CAPTURE_STDERR_H

#include <stdio.h>
#include <unistd.h>

struct capture_stderr {
	FILE *tmp;
	int saved; /* the real fd 2 */
};

static inline void capture_stderr_begin(struct capture_stderr *c)
{
	c->tmp = tmpfile();
	assert_non_null(c->tmp);
	c->saved = dup(2);
	assert_true(c->saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(c->tmp), 2) == 2);
}

static inline char *capture_stderr_end(struct capture_stderr *c, char *buf, size_t len)
{
	size_t n;

	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	rewind(c->tmp);
	n = fread(buf, 1, len - 1, c->tmp);
	buf[n] = '\0';
	fclose(c->tmp);
	return buf;
}

#endif
