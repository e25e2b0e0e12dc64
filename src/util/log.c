/* Leveled logging to stderr for setup and control paths (see qlink/log.h). */
#include "qlink/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int level = -1;

static enum ql_log_level level_from_env(void)
{
	const char *e = getenv("QLINK_LOG");

	if (!e)
		return QL_LOG_WARN;
	if (!strcmp(e, "error"))
		return QL_LOG_ERROR;
	if (!strcmp(e, "info"))
		return QL_LOG_INFO;
	if (!strcmp(e, "debug"))
		return QL_LOG_DEBUG;
	return QL_LOG_WARN;
}

void ql_log_set_level(enum ql_log_level l)
{
	__atomic_store_n(&level, (int)l, __ATOMIC_RELAXED);
}

enum ql_log_level ql_log_get_level(void)
{
	int l = __atomic_load_n(&level, __ATOMIC_RELAXED);

	if (l < 0) {
		l = (int)level_from_env();
		__atomic_store_n(&level, l, __ATOMIC_RELAXED);
	}
	return (enum ql_log_level)l;
}

void ql_log(enum ql_log_level l, const char *component, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	char msg[1024];
	va_list ap;

	if ((int)l > (int)ql_log_get_level())
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One write per line so concurrent processes do not interleave. */
	fprintf(stderr, "qlink %s [%s] %s\n", names[l], component, msg);
}
