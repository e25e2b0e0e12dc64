/* SPDX-License-Identifier: MIT */
/*
 * expect_detail: the assertion the error-path tests share, that the detail
 * ql_error_set left for the last failed call names what went wrong (the
 * errno alone does not say which check refused). Include after <cmocka.h>.
 */
#ifndef QL_TEST_EXPECT_DETAIL_H
#define QL_TEST_EXPECT_DETAIL_H

#include <string.h>

#include <qlink/error.h>

static inline void expect_detail(const char *part)
{
	const char *d = ql_error_detail();

	if (!d || !strstr(d, part))
		fail_msg("error detail '%s' lacks '%s'", d ? d : "(null)", part);
}

#endif
