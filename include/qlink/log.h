/* SPDX-License-Identifier: MIT */
/*
 * log: leveled, structured log lines for setup and control paths.
 *
 * Never called on a hot path (post, poll, dispatch). Lines go to stderr as
 * `qlink LEVEL [component] message`; the threshold comes from the QLINK_LOG
 * environment variable (error, warn, info, debug; default warn) or
 * ql_log_set_level(). A program with its own log format (qlinkd's JSON
 * lines) takes the lines instead with ql_log_set_sink().
 */
#ifndef QLINK_LOG_H
#define QLINK_LOG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum ql_log_level { QL_LOG_ERROR = 0, QL_LOG_WARN = 1, QL_LOG_INFO = 2, QL_LOG_DEBUG = 3 };

void ql_log_set_level(enum ql_log_level level);
enum ql_log_level ql_log_get_level(void);
/* Where lines at or under the threshold go: sink(ctx, level, component,
 * message) with the message formatted but not escaped (the sink escapes as
 * its format needs), instead of stderr; NULL: stderr again. Set it before
 * other threads log. */
typedef void (*ql_log_sink_fn)(void *ctx, enum ql_log_level level, const char *component,
			       const char *message);
void ql_log_set_sink(ql_log_sink_fn sink, void *ctx);
/* Copy `in` into `out` (cap bytes, NUL included) with backslash, quote,
 * control characters and DEL escaped (\\, \", \n, \r, \t, \xHH), truncated at a
 * whole escape; returns the length written. ql_log() applies it to every
 * message, so peer-supplied text can forge neither lines nor JSON keys. */
size_t ql_log_escape(char *out, size_t cap, const char *in);
void ql_log(enum ql_log_level level, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define ql_log_error(comp, ...) ql_log(QL_LOG_ERROR, comp, __VA_ARGS__)
#define ql_log_warn(comp, ...) ql_log(QL_LOG_WARN, comp, __VA_ARGS__)
#define ql_log_info(comp, ...) ql_log(QL_LOG_INFO, comp, __VA_ARGS__)
#define ql_log_debug(comp, ...) ql_log(QL_LOG_DEBUG, comp, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
