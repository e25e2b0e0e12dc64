/* SPDX-License-Identifier: MIT */
/*
 * An endpoint client using the typed functions qlink-epgen generated from
 * endpoints.yaml: one call per endpoint, checked.
 *
 *   ep_example_client DEVICE ADDRESS
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <qlink/error.h>

#include "endpoints.h"

int main(int argc, char **argv)
{
	struct ql_ep_client *c;
	char answer[ENDPOINTS_RECV_RDMA_EP0_SIZE];
	uint8_t *buf;
	uint64_t n1, n2;
	long len;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEVICE ADDRESS\n", argv[0]);
		return 2;
	}
	if (ql_ep_client_connect(argv[1], argv[2], &c)) {
		fprintf(stderr, "client: %s\n", ql_error_detail());
		return 1;
	}
	/* registered memory: the writes and reads below copy nothing */
	buf = ql_ep_client_alloc(c, ENDPOINTS_WRITE_RDMA_EP1_SIZE);
	if (!buf)
		goto fail;
	if (endpoints_send_rdma_ep0(c, "ping", 4))
		goto fail;
	len = endpoints_recv_rdma_ep0(c, answer, sizeof(answer));
	if (len < 0)
		goto fail;
	printf("example client: sent \"ping\", received \"%.*s\"\n", (int)len, answer);
	memset(buf, 0xab, ENDPOINTS_WRITE_RDMA_EP1_SIZE);
	for (int i = 0; i < 10; i++)
		if (endpoints_write_rdma_ep1(c, buf, ENDPOINTS_WRITE_RDMA_EP1_SIZE))
			goto fail;
	if (endpoints_read_rdma_ep1(c, &n1, sizeof(n1)) ||
	    endpoints_read_rdma_ep1(c, &n2, sizeof(n2)))
		goto fail;
	printf("example client: 10 writes of 4 MiB; reads stamped %llu then %llu\n",
	       (unsigned long long)n1, (unsigned long long)n2);
	if (len != 10 || memcmp(answer, "pong: ping", 10) || n2 != n1 + 1) {
		fprintf(stderr, "client: unexpected answers\n");
		ql_ep_client_close(c);
		return 1;
	}
	ql_ep_client_close(c);
	printf("example client: OK\n");
	return 0;
fail:
	fprintf(stderr, "client: %s\n", ql_error_detail());
	ql_ep_client_close(c);
	return 1;
}
