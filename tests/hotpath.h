/* SPDX-License-Identifier: MIT */
/*
 * hotpath: test support to prove a loop allocates nothing, takes no lock
 * and makes no system call.
 *
 * Allocation and locking: this module defines malloc & co. and the pthread
 * lock calls, forwarding to libc through dlsym(RTLD_NEXT), and counts the
 * calls made between hp_begin and hp_end (in any thread). Not available
 * under AddressSanitizer, which owns malloc.
 *
 * System calls: hp_run_strict runs a loop in a forked child under a seccomp
 * filter that allows read, write, exit and sigreturn only and kills the
 * child at the first other system call. (Not SECCOMP_MODE_STRICT: on x86
 * it also disables RDTSC, which code under test may use.)
 */
#ifndef QL_TESTS_HOTPATH_H
#define QL_TESTS_HOTPATH_H

#include <stdbool.h>
#include <stddef.h>

bool hp_available(void);
void hp_begin(void);
void hp_end(unsigned long *allocs, unsigned long *locks);

/* Install the seccomp filter of the strict proof in the calling process
 * (it cannot be undone): read, write, exit, exit_group, rt_sigreturn and
 * the n (<= 8) system calls in extra are allowed, anything else kills the
 * process. 0 or -1. */
int hp_seccomp_allow(const int *extra, int n);

/* In a forked child: setup(arg) (anything goes), then the seccomp filter,
 * then loop(arg) (must return 0). Returns 0 if the child got through, else
 * -1 with a sentence in why. */
int hp_run_strict(int (*setup)(void *arg), int (*loop)(void *arg), void *arg, char *why,
		  size_t whylen);
/* The same with the *nextra system calls of extra allowed besides (both
 * read after setup, which may fill them in; nextra NULL: none). */
int hp_run_strict_allow(int (*setup)(void *arg), int (*loop)(void *arg), void *arg,
			const int *extra, const int *nextra, char *why, size_t whylen);

/* Both proofs for loop(arg) (which must return 0): run it between
 * hp_begin and hp_end where interposition is available (no allocator or
 * lock call), then again in a child under the seccomp filter. 0, or -1
 * with a sentence in why. */
int hp_check(int (*loop)(void *arg), void *arg, char *why, size_t whylen);

#endif
