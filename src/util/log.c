/* SPDX-License-Identifier: MIT */
/* Leveled logging to stderr for setup and control paths (see qlink/log.h). */
#include "qlink/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int level = -1;
static ql_log_sink_fn sink;
static void *sink_ctx;

void ql_log_set_sink(ql_log_sink_fn fn, void *ctx)
{
	sink_ctx = ctx;
	__atomic_store_n(&sink, fn, __ATOMIC_RELEASE);
}

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

size_t ql_log_escape(char *out, size_t cap, const char *in)
{
	static const char hx[] = "0123456789abcdef";
	size_t o = 0;

	if (!cap)
		return 0;
	for (const unsigned char *p = (const unsigned char *)(in ? in : ""); *p; p++) {
		char e[5];
		size_t k = 0;

		if (*p == '\\' || *p == '"') {
			e[k++] = '\\';
			e[k++] = (char)*p;
		} else if (*p == '\n' || *p == '\r' || *p == '\t') {
			e[k++] = '\\';
			e[k++] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
		} else if (*p < 0x20 || *p == 0x7f) {
			e[k++] = '\\';
			e[k++] = 'x';
			e[k++] = hx[*p >> 4];
			e[k++] = hx[*p & 15];
		} else {
			e[k++] = (char)*p;
		}
		if (o + k >= cap)
			break; /* truncated at a whole escape, never in the middle of one */
		memcpy(out + o, e, k);
		o += k;
	}
	out[o] = 0;
	return o;
}

void ql_log(enum ql_log_level l, const char *component, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	char msg[1024], safe[2048];
	ql_log_sink_fn fn;
	va_list ap;

	if ((int)l > (int)ql_log_get_level())
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fn = __atomic_load_n(&sink, __ATOMIC_ACQUIRE);
	if (fn) {
		fn(sink_ctx, l, component ? component : "", msg);
		return;
	}
	/* Messages carry strings from peers (names, reasons): escaped, so that no
	 * line, terminal control or quote can be forged into the log. */
	ql_log_escape(safe, sizeof(safe), msg);
	/* One write per line so concurrent processes do not interleave. */
	fprintf(stderr, "qlink %s [%s] %s\n", names[l], component, safe);
}
