/* SPDX-License-Identifier: MIT */
/*
 * verbs_hello: the README's example, runnable. Two RC QPs on one soft
 * device, one RDMA WRITE between them. Run with a device URI argument to try
 * another wire (default soft://loop).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <qlink/error.h>
#include <qlink/verbs.h>

#define CHECK(call)                                                                \
	do {                                                                       \
		int ret_ = (call);                                                 \
		if (ret_) {                                                        \
			fprintf(stderr, "%s: %s (%s)\n", #call, ql_strerror(ret_), \
				ql_error_detail());                                \
			return 1;                                                  \
		}                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	const char *uri = argc > 1 ? argv[1] : "soft://loop";
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_mr *mr;
	struct ql_cq *cq;
	struct ql_qp *a, *b;
	struct ql_conn_params pa, pb;
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	char *buf = ql_mem_alloc(4096); /* page-aligned, zero-filled */
	int n;

	if (!buf) {
		perror("ql_mem_alloc");
		return 1;
	}
	CHECK(ql_device_open(uri, &dev));
	CHECK(ql_pd_alloc(dev, &pd));
	CHECK(ql_mr_reg(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr));
	CHECK(ql_cq_create(dev, 16, &cq));
	struct ql_qp_init_attr qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16,
			 .max_recv_wr = 16,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	CHECK(ql_qp_create(pd, &qa, &a));
	CHECK(ql_qp_create(pd, &qa, &b));
	CHECK(ql_qp_local_params(a, &pa)); /* what peers exchange out of band */
	CHECK(ql_qp_local_params(b, &pb));
	CHECK(ql_qp_connect(a, &pb, NULL)); /* RESET -> INIT -> RTR -> RTS */
	CHECK(ql_qp_connect(b, &pa, NULL));

	strcpy(buf, "hello"); /* a writes buf[0..6) to b's buf + 2048 */
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 6, .lkey = ql_mr_lkey(mr) };
	struct ibv_send_wr wr = {
		.wr_id = 1,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)buf + 2048, .rkey = ql_mr_rkey(mr) },
	};
	CHECK(ql_qp_post_send(a, &wr, &bad));
	while ((n = ql_cq_poll(cq, 1, &wc)) == 0)
		; /* no hidden threads: polling is progress */
	if (n < 0 || wc.status != IBV_WC_SUCCESS || wc.wr_id != 1 || strcmp(buf + 2048, "hello")) {
		fprintf(stderr, "unexpected completion: n=%d status=%s\n", n,
			n > 0 ? ibv_wc_status_str(wc.status) : ql_strerror(n));
		return 1;
	}
	printf("%s: wrote \"%s\" with one RDMA WRITE\n", uri, buf + 2048);

	CHECK(ql_qp_destroy(a));
	CHECK(ql_qp_destroy(b));
	CHECK(ql_cq_destroy(cq));
	CHECK(ql_mr_dereg(mr));
	CHECK(ql_pd_free(pd));
	CHECK(ql_device_close(dev));
	ql_mem_free(buf);
	return 0;
}
