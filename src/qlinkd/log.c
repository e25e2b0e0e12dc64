/* SPDX-License-Identifier: MIT */
/* qlinkd's structured logs: text or JSON lines (docs/qlinkd.md). */

#define _GNU_SOURCE

#include "qlinkd_int.h"

/* ---- structured logs ------------------------------------------------------ */

static struct {
	enum ql_log_level level;
	enum ql_config_log_format format;
} logcfg = { QL_LOG_INFO, QL_LOG_FORMAT_TEXT };

void qlinkd_log_config(enum ql_log_level level, enum ql_config_log_format format)
{
	logcfg.level = level;
	logcfg.format = format;
}

static void json_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static bool is_number(const char *s, size_t n)
{
	char buf[64], *end;

	if (!n || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (strspn(buf, "-0123456789.") != n)
		return false; /* no hex, inf or nan: not JSON numbers */
	strtod(buf, &end);
	return *end == '\0';
}

/*
 * One line: time, level, component, message, then the key=value pairs of
 * kv (printf-formatted; pairs separated by spaces, values without spaces).
 * Lines at or under the configured level go to stderr; force sends to out
 * whatever the level (the counters).
 */
void qlinkd_log_to(FILE *out, bool force, enum ql_log_level level, const char *comp,
		   const char *msg, const char *kv, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	char pairs[1024] = "", ts[40], *p;
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (!force && (int)level > (int)logcfg.level)
		return;
	if (kv) {
		va_start(ap, kv);
		vsnprintf(pairs, sizeof(pairs), kv, ap);
		va_end(ap);
	}
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	flockfile(out);
	if (logcfg.format == QL_LOG_FORMAT_TEXT) {
		/* Values can come from peers: control characters, quotes and backslashes
		 * escaped, so that no line or field can be forged (JSON: json_str). */
		char safe[4 * sizeof(pairs)];

		fprintf(out, "%s.%06ldZ %s %s ", ts, now.tv_nsec / 1000, names[level], comp);
		ql_log_escape(safe, sizeof(safe), msg);
		if (strchr(msg, ' '))
			fprintf(out, "\"%s\"", safe);
		else
			fputs(safe, out);
		ql_log_escape(safe, sizeof(safe), pairs);
		if (pairs[0])
			fprintf(out, " %s", safe);
		fputc('\n', out);
	} else {
		fprintf(out, "{\"ts\":\"%s.%06ldZ\",\"level\":\"%s\",\"component\":", ts,
			now.tv_nsec / 1000, names[level]);
		json_str(out, comp, strlen(comp));
		fputs(",\"msg\":", out);
		json_str(out, msg, strlen(msg));
		for (p = pairs; *p;) {
			char *sp = strchr(p, ' '), *eq;
			size_t n = sp ? (size_t)(sp - p) : strlen(p);

			eq = memchr(p, '=', n);
			if (eq) {
				fputc(',', out);
				json_str(out, p, (size_t)(eq - p));
				fputc(':', out);
				if (is_number(eq + 1, n - (size_t)(eq - p) - 1))
					fwrite(eq + 1, 1, n - (size_t)(eq - p) - 1, out);
				else
					json_str(out, eq + 1, n - (size_t)(eq - p) - 1);
			}
			p += n;
			while (*p == ' ')
				p++;
		}
		fputs("}\n", out);
	}
	fflush(out);
	funlockfile(out);
}
