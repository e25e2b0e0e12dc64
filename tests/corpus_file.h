/* SPDX-License-Identifier: MIT */
/*
 * Reading a fuzz-corpus input in the corpus-replay tests
 * (test_control_corpus, test_rpc_ring_corpus). Header-only; include after
 * cmocka.h.
 */
#ifndef QL_TEST_CORPUS_FILE_H
#define QL_TEST_CORPUS_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The first cap bytes (at most) of the file at path into buf: how many. The
 * file must open. */
static inline size_t ql_test_read_file(const char *path, uint8_t *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

#endif
