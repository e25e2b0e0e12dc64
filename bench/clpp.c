/* SPDX-License-Identifier: MIT */
/*
 * qlink-clpp: the cache-line ping-pong floor between two cores. Two
 * processes share one page; each round trip is one store by each side and
 * one load of the other's line (or the same line with --same-line): no
 * software NIC can beat it, so it is the yardstick the benchmarks quote.
 *
 * usage: qlink-clpp [ITERS [SAME_LINE [CPU_A [CPU_B]]]]   (1000000 0 0 1)
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qlink/clock.h"
#include "qlink/histogram.h"

struct line {
	_Alignas(64) volatile uint64_t v;
};

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int same = argc > 2 ? atoi(argv[2]) : 0;
	int ca = argc > 3 ? atoi(argv[3]) : 0, cb = argc > 4 ? atoi(argv[4]) : 1;
	const long warm = 100000;
	struct line *sh;
	volatile uint64_t *ping, *pong;
	struct ql_hist h;
	double ghz = ql_tsc_ghz();
	pid_t pid;

	if (n < 1) {
		fprintf(stderr, "usage: %s [ITERS [SAME_LINE [CPU_A [CPU_B]]]]\n", argv[0]);
		return 2;
	}
	sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	ping = &sh[0].v;
	pong = same ? &sh[0].v : &sh[1].v;
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) { /* answer 2i+1 on ping with 2i+2 on pong */
		ql_cpu_pin(cb);
		for (long i = 0; i < n + warm; i++) {
			uint64_t want = 2 * (uint64_t)i + 1;

			while (*ping != want)
				;
			*pong = want + 1;
		}
		_exit(0);
	}
	ql_cpu_pin(ca);
	ql_hist_init(&h);
	for (long i = 0; i < n + warm; i++) {
		uint64_t t0 = ql_tsc();

		*ping = 2 * (uint64_t)i + 1;
		while (*pong != 2 * (uint64_t)i + 2)
			;
		if (i >= warm)
			ql_hist_record(&h, (uint64_t)((double)(ql_tsc() - t0) / ghz));
	}
	waitpid(pid, NULL, 0);
	printf("%s-line cpu%d<->cpu%d, %ld round trips: p50 %lu ns, p90 %lu, p99 %lu, p99.9 %lu, "
	       "max %lu\n",
	       same ? "same" : "two", ca, cb, n, (unsigned long)ql_hist_percentile(&h, 50),
	       (unsigned long)ql_hist_percentile(&h, 90), (unsigned long)ql_hist_percentile(&h, 99),
	       (unsigned long)ql_hist_percentile(&h, 99.9), (unsigned long)ql_hist_max(&h));
	return 0;
}
