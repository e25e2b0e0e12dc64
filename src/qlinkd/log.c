/* SPDX-License-Identifier: MIT */
/* qlinkd's structured logs: text or JSON lines (docs/qlinkd.md, "Logs"). */

#define _GNU_SOURCE

#include "qlinkd_int.h"

/* ---- structured logs ------------------------------------------------------ */

static struct {
	enum ql_log_level level;
	enum ql_config_log_format format;
} logcfg = { QL_LOG_INFO, QL_LOG_FORMAT_TEXT };

/* The library's own ql_log() lines (providers, plugin loader, control
 * plane), and plugins that call ql_log(): written as qlinkd's lines, so
 * stderr holds one format. */
static void library_sink(void *ctx, enum ql_log_level level, const char *comp, const char *msg)
{
	(void)ctx;
	qlinkd_log_fields(stderr, true, level, comp, msg,
			  (const struct qlinkd_field[]){ QS("source", "libqlink"), { 0 } });
}

void qlinkd_log_config(enum ql_log_level level, enum ql_config_log_format format)
{
	logcfg.level = level;
	logcfg.format = format;
	/* ql_log() filters on its own level (set alike) before the sink */
	ql_log_set_sink(library_sink, NULL);
}

bool qlinkd_log_json(void)
{
	return logcfg.format == QL_LOG_FORMAT_JSON;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t k;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		k = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		k = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		k = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (k > n)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong, surrogates, beyond U+10FFFF */
	if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return k;
}

/* A JSON string (RFC 8259): quote, backslash and control characters
 * escaped, bytes that are not UTF-8 replaced by U+FFFD. */
void qlinkd_json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)p);

	fputc('"', f);
	for (size_t i = 0; i < n;) {
		size_t k = utf8_len(p + i, n - i);

		if (!k) {
			fputs("\\ufffd", f);
			i++;
		} else if (p[i] == '"' || p[i] == '\\') {
			fprintf(f, "\\%c", p[i++]);
		} else if (p[i] < 0x20 || p[i] == 0x7f) {
			fprintf(f, "\\u%04x", p[i++]);
		} else {
			fwrite(p + i, 1, k, f);
			i += k;
		}
	}
	fputc('"', f);
}

/* A text value: as it is when it has no blank, quote, '=', backslash or
 * control byte and is not empty; else quoted with ql_log_escape's escapes
 * (\\, \", \n, \r, \t, \xHH), so that a reader gets the value back. */
static void text_value(FILE *f, const char *s)
{
	char safe[4096];

	s = s ? s : "";
	if (*s &&
	    !s[strcspn(s, " \"=\\\x7f\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e"
			  "\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f")]) {
		fputs(s, f);
		return;
	}
	ql_log_escape(safe, sizeof(safe), s);
	fprintf(f, "\"%s\"", safe);
}

static void field_value(FILE *out, bool json, const struct qlinkd_field *f)
{
	switch (f->type) {
	case QF_STR:
		if (json)
			qlinkd_json_str(out, f->v.s);
		else
			text_value(out, f->v.s);
		break;
	case QF_UINT:
		fprintf(out, "%" PRIu64, f->v.u);
		break;
	case QF_INT:
		fprintf(out, "%" PRId64, f->v.i);
		break;
	case QF_HEX:
		fprintf(out, json ? "\"0x%" PRIx64 "\"" : "0x%" PRIx64, f->v.u);
		break;
	case QF_HEX32:
		fprintf(out, json ? "\"0x%08" PRIx64 "\"" : "0x%08" PRIx64, f->v.u);
		break;
	case QF_REAL:
		if (f->v.d == f->v.d && f->v.d - f->v.d == 0) /* finite */
			fprintf(out, "%.0f", f->v.d);
		else
			fputs(json ? "null" : "nan", out);
		break;
	default:
		break;
	}
}

/*
 * One line: time, level, component, message, then the fields (typed: a
 * string is quoted and escaped as the format needs, a number is a number).
 * Lines at or under the configured level go to out; force writes whatever
 * the level (the counters, and library lines ql_log() already filtered).
 */
void qlinkd_log_fields(FILE *out, bool force, enum ql_log_level level, const char *comp,
		       const char *msg, const struct qlinkd_field *f)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	bool json = logcfg.format == QL_LOG_FORMAT_JSON;
	char ts[40];
	struct timespec now;
	struct tm tm;

	if (!force && (int)level > (int)logcfg.level)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	flockfile(out);
	if (json) {
		fprintf(out, "{\"ts\":\"%s.%06ldZ\",\"level\":\"%s\",\"component\":", ts,
			now.tv_nsec / 1000, names[level]);
		qlinkd_json_str(out, comp);
		fputs(",\"msg\":", out);
		qlinkd_json_str(out, msg);
	} else {
		fprintf(out, "%s.%06ldZ %s ", ts, now.tv_nsec / 1000, names[level]);
		text_value(out, comp);
		fputc(' ', out);
		text_value(out, msg);
	}
	for (; f && f->key; f++) {
		if (json) {
			fputc(',', out);
			qlinkd_json_str(out, f->key);
			fputc(':', out);
		} else {
			fprintf(out, " %s=", f->key);
		}
		field_value(out, json, f);
	}
	fputs(json ? "}\n" : "\n", out);
	fflush(out);
	funlockfile(out);
}

/* The operator's plain `WHERE: problem` line, as --check-config prints it:
 * in the text format only (in JSON the logged line carries the same). */
void qlinkd_say(const char *fmt, ...)
{
	va_list ap;

	if (logcfg.format == QL_LOG_FORMAT_JSON)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* A configuration's problems: FILE:LINE: message lines (text), or one
 * logged line each (JSON). */
void qlinkd_log_diags(const struct ql_diags *diags, const char *file)
{
	if (logcfg.format != QL_LOG_FORMAT_JSON) {
		ql_diags_print(diags, file, stderr);
		return;
	}
	for (unsigned i = 0; i < diags->count; i++)
		qlog(QL_LOG_ERROR, "config", diags->d[i].msg, QS("config", file),
		     QU("line", diags->d[i].line));
	if (diags->dropped)
		qlog(QL_LOG_ERROR, "config", "more problems not listed", QS("config", file),
		     QU("more", diags->dropped));
}
