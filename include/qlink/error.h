/* SPDX-License-Identifier: MIT */
/*
 * error: how qlink reports failures.
 *
 * Every qlink function that can fail returns 0 (or a count) on success and a
 * negative errno on failure. ql_strerror() turns that into text; setup-path
 * calls also leave a sentence naming the exact cause (which URI, which limit)
 * in a thread-local detail buffer, read with ql_error_detail(), so tools can
 * print a clear message without guessing from the errno alone.
 */
#ifndef QLINK_ERROR_H
#define QLINK_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* Text for a negative (or positive) errno value; never NULL. */
const char *ql_strerror(int err);

/* The detail sentence of the last failed setup call on this thread, or "". */
const char *ql_error_detail(void);

/* Set the detail sentence (printf-style) and return err unchanged, so that
 * error paths can read `return ql_error_set(-EINVAL, "...", ...);`. */
int ql_error_set(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forget the detail sentence. */
void ql_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif
