/* SPDX-License-Identifier: MIT */
/*
 * ql-free-port [N]: print a base port P with P .. P+N-1 (default 1) free
 * for UDP, asked of the kernel (tests/free_port.h). For the test scripts
 * that start qlinkd (tests/qlinkd_lib.sh): exit 1 when none was found.
 */
#include "free_port.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1, p = ql_test_free_ports(n);

	if (p < 0) {
		fprintf(stderr, "ql-free-port: no %d free consecutive UDP ports\n", n);
		return 1;
	}
	printf("%d\n", p);
	return 0;
}
