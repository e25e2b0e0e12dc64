/* SPDX-License-Identifier: MIT */
/*
 * Diagnostics of an input file: each problem with its line, so that
 * `qlinkd --check-config FILE` (and every other reader of a YAML file:
 * VPPU programs, endpoints files) can print `FILE:LINE: message` lines an
 * editor can jump to. In-tree only (the yamlfile module, yamlfile.h).
 */
#ifndef QL_YAMLFILE_DIAG_H
#define QL_YAMLFILE_DIAG_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- diagnostics ------------------------------------------------------- */

#define QL_DIAG_MAX 32
#define QL_DIAG_MSG_MAX 256

/* One problem in an input file; line is 1-based, 0 when it has none (the
 * file could not be read at all). */
struct ql_diag {
	unsigned line;
	char msg[QL_DIAG_MSG_MAX];
};

/* The problems found in one file, in the order found; those beyond
 * QL_DIAG_MAX are counted in dropped. */
struct ql_diags {
	unsigned count;
	unsigned dropped;
	struct ql_diag d[QL_DIAG_MAX];
};

/* Print each diagnostic as "file:line: msg" (or "file: msg" without a
 * line), one per line, and a "... N more" line if some were dropped. */
void ql_diags_print(const struct ql_diags *diags, const char *file, FILE *f);

#ifdef __cplusplus
}
#endif

#endif
