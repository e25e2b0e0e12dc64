/* SPDX-License-Identifier: MIT */
/*
 * ql_mr_reg_iova: a region that peers address from an iova (0 here, as the
 * hsb transport registers its pages) instead of its virtual address. Each
 * test runs on soft://loop and soft+shm (and an ibv pair when given).
 */
#include "verbs_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#define LK(e) ql_mr_lkey((e)->mr)
#define IOVA_LEN 8192u

/* b's buffer registered a second time, at iova 0, for remote write/read. */
static struct ql_mr *reg0(struct vt_pair *pr)
{
	struct ql_mr *mr = NULL;
	int ret = ql_mr_reg_iova(
		pr->b.pd, pr->b.buf, IOVA_LEN, 0,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, &mr);

	if (ret == -EOPNOTSUPP && pr->param->ibv) {
		vt_note(pr->param, "no ibv_reg_mr_iova here: %s", ql_error_detail());
		skip();
	}
	assert_int_equal(ret, 0);
	return mr;
}

/* WRITE to iova 0 + k lands at addr + k; READ from iova k reads addr + k. */
static void test_write_read_at_iova(void **state)
{
	struct vt_pair *pr = *state;
	struct ql_mr *mr = reg0(pr);
	struct ibv_wc wc;

	memset(pr->a.buf, 0x5a, 64);
	memset(pr->b.buf, 0, IOVA_LEN);
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 64, LK(&pr->a), 4096, ql_mr_rkey(mr),
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(pr->b.buf[4095], 0);
	assert_int_equal(pr->b.buf[4096], 0x5a);
	assert_int_equal(pr->b.buf[4096 + 63], 0x5a);
	assert_int_equal(pr->b.buf[4096 + 64], 0);
	/* the last bytes of the region are in range */
	assert_int_equal(vt_post_write(pr->a.qp, 2, pr->a.buf, 64, LK(&pr->a), IOVA_LEN - 64,
				       ql_mr_rkey(mr), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(pr->b.buf[IOVA_LEN - 1], 0x5a);

	pr->b.buf[100] = 0x77;
	memset(pr->a.buf + 1024, 0, 16);
	assert_int_equal(vt_post_read(pr->a.qp, 3, pr->a.buf + 1024, 16, LK(&pr->a), 100,
				      ql_mr_rkey(mr), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_int_equal(pr->a.buf[1024], 0x77);
	assert_int_equal(ql_mr_dereg(mr), 0);
}

/* One byte past the iova range: remote access error, nothing written. */
static void test_write_past_end(void **state)
{
	struct vt_pair *pr = *state;
	struct ql_mr *mr = reg0(pr);
	struct ibv_wc wc;

	memset(pr->a.buf, 0x5a, 64);
	memset(pr->b.buf, 0, VT_BUF_LEN);
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 64, LK(&pr->a), IOVA_LEN - 63,
				       ql_mr_rkey(mr), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_REM_ACCESS_ERR, -1);
	for (size_t i = 0; i < VT_BUF_LEN; i++)
		assert_int_equal(pr->b.buf[i], 0);
	ql_mr_dereg(mr);
}

/* The region's virtual address is not an address of the iova space. */
static void test_write_at_vaddr(void **state)
{
	struct vt_pair *pr = *state;
	struct ql_mr *mr = reg0(pr);
	struct ibv_wc wc;

	memset(pr->a.buf, 0x5a, 64);
	memset(pr->b.buf, 0, IOVA_LEN);
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 64, LK(&pr->a),
				       (uint64_t)(uintptr_t)pr->b.buf, ql_mr_rkey(mr),
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_REM_ACCESS_ERR, -1);
	assert_int_equal(pr->b.buf[0], 0);
	ql_mr_dereg(mr);
}

/* UC, as hsb uses it: WRITE WITH IMMEDIATE to a page at iova 0 + k*128,
 * receive WQE without SGEs; out of range is dropped and counted. */
static void test_uc_write_imm_pages(void **state)
{
	struct vt_pair *pr = *state;
	struct ql_mr *mr = reg0(pr);
	struct ql_device_counters c0, c1;
	struct ibv_recv_wr rwr = { .wr_id = 7, .num_sge = 0 }, *bad;
	struct ibv_wc wc;

	memset(pr->a.buf, 0x33, 128);
	memset(pr->b.buf, 0, IOVA_LEN);
	assert_int_equal(ql_qp_post_recv(pr->b.qp, &rwr, &bad), 0);
	assert_int_equal(vt_post_write_imm(pr->a.qp, 1, pr->a.buf, 100, LK(&pr->a), 3 * 128,
					   ql_mr_rkey(mr), htonl(3), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_expect_wc(pr->b.rcq, &wc, 7, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.byte_len, 100);
	assert_int_equal(ntohl(wc.imm_data), 3);
	assert_int_equal(pr->b.buf[3 * 128], 0x33);
	assert_int_equal(pr->b.buf[3 * 128 + 99], 0x33);
	assert_int_equal(pr->b.buf[3 * 128 + 100], 0);

	if (!pr->param->ibv)
		assert_int_equal(ql_device_counters(pr->b.dev, &c0), 0);
	assert_int_equal(ql_qp_post_recv(pr->b.qp, &rwr, &bad), 0);
	assert_int_equal(vt_post_write_imm(pr->a.qp, 2, pr->a.buf, 128, LK(&pr->a), IOVA_LEN,
					   ql_mr_rkey(mr), htonl(64), IBV_SEND_SIGNALED),
			 0);
	/* UC: the requester completes, the responder drops */
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(vt_poll_for(pr->b.rcq, &wc, 1, 50), 0);
	if (!pr->param->ibv) {
		assert_int_equal(ql_device_counters(pr->b.dev, &c1), 0);
		assert_int_equal(c1.uc_drop_access, c0.uc_drop_access + 1);
	}
	ql_mr_dereg(mr);
}

/* soft: an MR whose iova is not its address is for remote access only. */
static void test_local_use_refused(void **state)
{
	struct vt_pair *pr = *state;
	struct ql_mr *mr = NULL;
	struct ibv_wc wc;

	VT_SOFT_ONLY(pr->param, "ibv takes iova addresses in local SGEs");
	assert_int_equal(ql_mr_reg_iova(pr->a.pd, pr->a.buf, IOVA_LEN, 0,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr),
			 0);
	assert_int_equal(vt_post_write(pr->a.qp, 1, (void *)(uintptr_t)0, 64, ql_mr_lkey(mr),
				       (uint64_t)(uintptr_t)pr->b.buf, ql_mr_rkey(pr->b.mr),
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_LOC_PROT_ERR, -1);
	ql_mr_dereg(mr);
}

static void test_args(void **state)
{
	struct vt_pair *pr = *state;
	struct ql_mr *mr = NULL;

	assert_int_equal(ql_mr_reg_iova(pr->b.pd, pr->b.buf, 4096, UINT64_MAX - 100,
					IBV_ACCESS_LOCAL_WRITE, &mr),
			 -EINVAL);
	assert_int_equal(ql_mr_reg_iova(pr->b.pd, NULL, 4096, 0, IBV_ACCESS_LOCAL_WRITE, &mr),
			 -EINVAL);
	assert_int_equal(ql_mr_reg_iova(NULL, pr->b.buf, 4096, 0, IBV_ACCESS_LOCAL_WRITE, &mr),
			 -EINVAL);
}

#define RC(f) cmocka_unit_test_setup_teardown(f, vt_setup_rc, vt_teardown)
#define UC(f) cmocka_unit_test_setup_teardown(f, vt_setup_uc, vt_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		RC(test_write_read_at_iova), RC(test_write_past_end),	 RC(test_write_at_vaddr),
		UC(test_uc_write_imm_pages), RC(test_local_use_refused), RC(test_args),
	};

	return VT_RUN_PER_URI(tests) ? 1 : 0;
}
