/* SPDX-License-Identifier: MIT */
/* Error text and the thread-local detail sentence (see qlink/error.h). */
#include "qlink/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread char detail[512];

const char *ql_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EPROTONOSUPPORT:
		return "device URI scheme not supported";
	case EOVERFLOW:
		return "completion queue overrun";
	default:
		return strerror(err);
	}
}

const char *ql_error_detail(void)
{
	return detail;
}

int ql_error_set(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return err;
}

void ql_error_clear(void)
{
	detail[0] = '\0';
}
