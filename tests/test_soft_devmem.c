/* SPDX-License-Identifier: MIT */
/*
 * GPU device memory on the software NICs (providers/common/devmem.h,
 * docs/gpu.md "Device memory on the software NICs"), against the stand-in
 * CUDA driver of cuda_fake.h: its device memory is an address range the
 * CPU cannot touch (PROT_NONE: a memcpy into it faults) whose bytes live
 * in a separate buffer that only the fake's copy functions reach. So a
 * WRITE, READ or SEND that lands there went through the copy engine. Each
 * data test runs on soft://loop and on soft+udp (the two NICs' data paths);
 * soft+shm has its own refusal.
 */
#include "verbs_fixture.h"

#include <errno.h>
#include <string.h>

#include "cuda_fake.h"
#include "hotpath.h"

#define DEV_LEN (64 * 1024)
#define HALF (DEV_LEN / 2)
#define LK(e) ql_mr_lkey((e)->mr)

struct dm {
	struct vt_pair *pr;
	uint8_t *dev;	   /* the fake device memory */
	struct ql_mr *bmr; /* [0, HALF) on b's PD, every access */
	struct ql_mr *amr; /* [HALF, DEV_LEN) on a's PD, local write */
	struct ql_mr *hmr; /* b's host buffer: a READ/WRITE target */
	const struct vt_param *p;
};

static int setup(void **state, const struct vt_param *p)
{
	struct dm *d = calloc(1, sizeof(*d));
	struct vt_opts o = { .type = IBV_QPT_RC };

	assert_non_null(d);
	d->p = p;
	cu_fake_install();
	d->dev = cu_fake_dev_mem(DEV_LEN);
	assert_int_equal(vt_pair_create(p, &o, &d->pr), 0);
	assert_int_equal(ql_mr_reg(d->pr->b.pd, d->dev, HALF, VT_ACCESS_ALL, &d->bmr), 0);
	assert_int_equal(
		ql_mr_reg(d->pr->a.pd, d->dev + HALF, HALF, IBV_ACCESS_LOCAL_WRITE, &d->amr), 0);
	*state = d;
	return 0;
}

static int setup_loop(void **state)
{
	return setup(state, &vt_params[0]);
}

static int setup_udp(void **state)
{
	return setup(state, &vt_params[2]);
}

static int teardown(void **state)
{
	struct dm *d = *state;

	assert_int_equal(ql_mr_dereg(d->bmr), 0);
	assert_int_equal(ql_mr_dereg(d->amr), 0);
	vt_pair_destroy(d->pr);
	cu_fake_dev_free();
	ql__cuda_drv_override(NULL);
	free(d);
	return 0;
}

static void pattern(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* A WRITE from host memory into device memory: through cuMemcpyHtoD, the
 * last 8 bytes in a second copy (placed last), never by the CPU. */
static void test_write_into_device(void **state)
{
	struct dm *d = *state;
	struct vt_pair *pr = d->pr;
	struct ibv_wc wc;

	pattern(pr->a.buf, 4000, 1);
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 4000, LK(&pr->a),
				       (uint64_t)(uintptr_t)d->dev + 100, ql_mr_rkey(d->bmr),
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(cu.dev.back + 100, pr->a.buf, 4000);
	assert_int_equal(cu.dev.back[99], 0);
	assert_int_equal(cu.dev.back[4100], 0);
	assert_true(cu.dev.htod >= 2); /* the body, then the last 8 bytes */
	assert_int_equal(cu.dev.dtoh, 0);

	/* a short one (under 8 bytes) and WRITE WITH IMMEDIATE */
	assert_int_equal(vt_post_recv(pr->b.qp, 7, pr->b.buf, 16, LK(&pr->b)), 0);
	assert_int_equal(vt_post_write_imm(pr->a.qp, 2, pr->a.buf, 5, LK(&pr->a),
					   (uint64_t)(uintptr_t)d->dev + 8000, ql_mr_rkey(d->bmr),
					   0x12345678, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_expect_wc(pr->b.rcq, &wc, 7, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_memory_equal(cu.dev.back + 8000, pr->a.buf, 5);
}

/* A READ out of device memory into host memory: cuMemcpyDtoH. */
static void test_read_from_device(void **state)
{
	struct dm *d = *state;
	struct vt_pair *pr = d->pr;
	struct ibv_wc wc;

	pattern(cu.dev.back + 200, 3000, 9);
	memset(pr->a.buf, 0, 4096);
	assert_int_equal(vt_post_read(pr->a.qp, 3, pr->a.buf, 3000, LK(&pr->a),
				      (uint64_t)(uintptr_t)d->dev + 200, ql_mr_rkey(d->bmr),
				      IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_memory_equal(pr->a.buf, cu.dev.back + 200, 3000);
	assert_true(cu.dev.dtoh >= 1);
	assert_int_equal(cu.dev.htod, 0);
}

/* A SEND into a receive buffer in device memory, scattered over a host
 * SGE and a device SGE. */
static void test_send_into_device_recv(void **state)
{
	struct dm *d = *state;
	struct vt_pair *pr = d->pr;
	struct ibv_sge sg[2] = {
		{ (uint64_t)(uintptr_t)pr->b.buf, 100, LK(&pr->b) },
		{ (uint64_t)(uintptr_t)d->dev + 512, 2048, ql_mr_lkey(d->bmr) },
	};
	struct ibv_recv_wr rwr = { .wr_id = 4, .sg_list = sg, .num_sge = 2 }, *bad;
	struct ibv_wc wc;

	memset(pr->b.buf, 0, 128);
	pattern(pr->a.buf, 1500, 3);
	assert_int_equal(ql_qp_post_recv(pr->b.qp, &rwr, &bad), 0);
	assert_int_equal(vt_post_send(pr->a.qp, 5, pr->a.buf, 1500, LK(&pr->a), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 5, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->b.rcq, &wc, 4, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 1500);
	assert_memory_equal(pr->b.buf, pr->a.buf, 100);
	assert_memory_equal(cu.dev.back + 512, pr->a.buf + 100, 1400);
	assert_true(cu.dev.htod >= 1);
}

/* Device memory as the local side: a WRITE and a SEND gathered from it
 * (DtoH), a READ scattered into it (HtoD), a WRITE device to device
 * (cuMemcpy under unified addressing). */
static void test_local_device_sges(void **state)
{
	struct dm *d = *state;
	struct vt_pair *pr = d->pr;
	uint8_t *src = d->dev + HALF;
	struct ibv_wc wc;

	pattern(cu.dev.back + HALF, 1024, 5);
	memset(pr->b.buf, 0, 1024);
	assert_int_equal(vt_post_write(pr->a.qp, 6, src, 1024, ql_mr_lkey(d->amr),
				       (uint64_t)(uintptr_t)pr->b.buf, ql_mr_rkey(pr->b.mr),
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 6, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(pr->b.buf, cu.dev.back + HALF, 1024);
	assert_true(cu.dev.dtoh >= 1);

	assert_int_equal(vt_post_recv(pr->b.qp, 8, pr->b.buf + 2048, 512, LK(&pr->b)), 0);
	assert_int_equal(
		vt_post_send(pr->a.qp, 9, src + 64, 300, ql_mr_lkey(d->amr), IBV_SEND_SIGNALED), 0);
	vt_expect_wc(pr->a.scq, &wc, 9, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->b.rcq, &wc, 8, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_memory_equal(pr->b.buf + 2048, cu.dev.back + HALF + 64, 300);

	pattern(pr->b.buf + 4096, 700, 11);
	assert_int_equal(vt_post_read(pr->a.qp, 10, src + 4096, 700, ql_mr_lkey(d->amr),
				      (uint64_t)(uintptr_t)pr->b.buf + 4096, ql_mr_rkey(pr->b.mr),
				      IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 10, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_memory_equal(cu.dev.back + HALF + 4096, pr->b.buf + 4096, 700);

	cu.dev.any = 0;
	assert_int_equal(vt_post_write(pr->a.qp, 11, src, 256, ql_mr_lkey(d->amr),
				       (uint64_t)(uintptr_t)d->dev + 16384, ql_mr_rkey(d->bmr),
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 11, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(cu.dev.back + 16384, cu.dev.back + HALF, 256);
	if (!d->p->udp) /* soft: one process copies device to device */
		assert_true(cu.dev.any >= 1);
}

/* An atomic on device memory cannot be made atomic by the copy engine:
 * refused as a remote access error, the memory untouched. */
static void test_atomic_refused(void **state)
{
	struct dm *d = *state;
	struct vt_pair *pr = d->pr;
	struct ibv_wc wc;

	cu.dev.back[64] = 0x42;
	assert_int_equal(vt_post_atomic(pr->a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 12, pr->a.buf,
					LK(&pr->a), (uint64_t)(uintptr_t)d->dev + 64,
					ql_mr_rkey(d->bmr), 1, 0, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 12, IBV_WC_REM_ACCESS_ERR, -1);
	assert_int_equal(cu.dev.back[64], 0x42);
	assert_int_equal(cu.dev.htod + cu.dev.dtoh + cu.dev.any, 0);
}

/* Host memory keeps memcpy: no driver call on a host-to-host WRITE/READ
 * with the driver loaded. */
static void test_host_path_untouched(void **state)
{
	struct dm *d = *state;
	struct vt_pair *pr = d->pr;
	struct ibv_wc wc;

	pattern(pr->a.buf, 512, 2);
	assert_int_equal(vt_post_write(pr->a.qp, 13, pr->a.buf, 512, LK(&pr->a),
				       (uint64_t)(uintptr_t)pr->b.buf, ql_mr_rkey(pr->b.mr),
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 13, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(pr->b.buf, pr->a.buf, 512);
	assert_int_equal(cu.dev.htod + cu.dev.dtoh + cu.dev.any, 0);
}

/* A copy the driver fails completes the WR in error (local QP operation
 * error), nothing placed. */
static void test_copy_failure(void **state)
{
	struct dm *d = *state;
	struct vt_pair *pr = d->pr;
	struct ibv_wc wc;

	cu.dev.fail = 700; /* CUDA_ERROR_ILLEGAL_ADDRESS */
	assert_int_equal(vt_post_write(pr->a.qp, 14, pr->a.buf, 64, LK(&pr->a),
				       (uint64_t)(uintptr_t)d->dev, ql_mr_rkey(d->bmr),
				       IBV_SEND_SIGNALED),
			 0);
	if (d->p->udp) /* the responder's failure: NAK'd, its QP in error */
		vt_expect_wc(pr->a.scq, &wc, 14, IBV_WC_REM_OP_ERR, -1);
	else
		vt_expect_wc(pr->a.scq, &wc, 14, IBV_WC_LOC_QP_OP_ERR, -1);
}

/* One signaled WR on a's QP, polled to its completion. */
static int post_poll(struct vt_pair *pr, enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey,
		     uint32_t len)
{
	struct ibv_sge sg = { (uint64_t)(uintptr_t)pr->a.buf, len, LK(&pr->a) };
	struct ibv_send_wr wr = { .sg_list = &sg,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	struct ibv_wc wc;
	int n;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ql_qp_post_send(pr->a.qp, &wr, &bad))
		return -1;
	do
		n = ql_cq_poll(pr->a.scq, 1, &wc);
	while (n == 0);
	return n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

static int hot_loop(void *arg)
{
	struct dm *d = arg;

	for (int i = 0; i < 2000; i++) {
		uint64_t at = (uint64_t)(uintptr_t)d->dev + (uint64_t)(i % 64) * 256;

		if (post_poll(d->pr, IBV_WR_RDMA_WRITE, at, ql_mr_rkey(d->bmr), 256) ||
		    post_poll(d->pr, IBV_WR_RDMA_READ, at, ql_mr_rkey(d->bmr), 256))
			return -1;
	}
	return 0;
}

/* The device path on soft://loop allocates nothing, takes no lock and
 * makes no system call of its own (the stand-in driver's copies make
 * none: what a real driver's copy does is its own, docs/gpu.md). */
static void test_device_path_hot(void **state)
{
	struct dm *d = *state;
	char why[256];

	if (d->p->udp) {
		print_message("[     SKIP ] soft+udp: its NIC thread makes system calls\n");
		skip();
	}
	if (hot_loop(d)) /* warm: every queue touched once */
		fail_msg("the loop failed before the proofs");
	if (hp_check(hot_loop, d, why, sizeof(why)))
		fail_msg("%s", why);
	assert_true(cu.dev.htod > 0 && cu.dev.dtoh > 0);
}

/* ---- registration ----------------------------------------------------- */

/* The driver's numbers the classification asks with, as cuda.h (CUDA 13.0)
 * defines them (CUpointer_attribute, CUmemorytype, CUdevice_attribute):
 * the fake answers by the same macros, so only this catches a wrong one. */
static void test_driver_abi_values(void **state)
{
	(void)state;
	assert_int_equal(QL__CUDA_PTR_ATTR_MEMORY_TYPE, 2);
	assert_int_equal(QL__CUDA_PTR_ATTR_HOST_POINTER, 4);
	assert_int_equal(QL__CUDA_PTR_ATTR_SYNC_MEMOPS, 6);
	assert_int_equal(QL__CUDA_PTR_ATTR_IS_MANAGED, 8);
	assert_int_equal(QL__CUDA_PTR_ATTR_DEVICE_ORDINAL, 9);
	assert_int_equal(QL__CUDA_PTR_ATTR_RANGE_START_ADDR, 11);
	assert_int_equal(QL__CUDA_PTR_ATTR_RANGE_SIZE, 12);
	assert_int_equal(QL__CUDA_MEMORYTYPE_DEVICE, 2);
	assert_int_equal(QL__CUDA_DEV_ATTR_UNIFIED_ADDRESSING, 41);
}

static struct ql_device *open_dev(const struct vt_param *p, struct ql_pd **pd)
{
	struct ql_device *dev = NULL;

	assert_int_equal(vt_dev_open(p, &dev), 0);
	assert_int_equal(ql_pd_alloc(dev, pd), 0);
	return dev;
}

static void close_dev(struct ql_device *dev, struct ql_pd *pd)
{
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), 0);
}

/* Neither the copy engine nor cuMemcpy with unified addressing: refused,
 * saying so; with cuMemcpy and unified addressing only, served by it. */
static void test_reg_needs_a_copy_path(void **state)
{
	struct ql_pd *pd;
	struct ql_device *dev;
	struct ql_mr *mr = NULL;
	uint8_t *m;

	(void)state;
	cu_fake_install();
	m = cu_fake_dev_mem(8192);
	dev = open_dev(&vt_params[0], &pd);
	cu_drv.memcpy_htod = NULL;
	cu_drv.memcpy_dtoh = NULL;
	cu.uva = false;
	assert_int_equal(ql_mr_reg(pd, m, 8192, IBV_ACCESS_LOCAL_WRITE, &mr), -EOPNOTSUPP);
	assert_non_null(strstr(ql_error_detail(), "neither"));
	assert_non_null(strstr(ql_error_detail(), "cuMemcpyHtoD"));
	cu_drv.memcpy_any = NULL;
	cu.uva = true;
	assert_int_equal(ql_mr_reg(pd, m, 8192, IBV_ACCESS_LOCAL_WRITE, &mr), -EOPNOTSUPP);
	/* unified addressing and cuMemcpy: fine */
	cu_drv.memcpy_any = cu_any;
	assert_int_equal(ql_mr_reg(pd, m, 8192, IBV_ACCESS_LOCAL_WRITE, &mr), 0);
	assert_int_equal(ql_mr_dereg(mr), 0);
	/* a range past its allocation */
	assert_int_equal(ql_mr_reg(pd, m + 4096, 8192, IBV_ACCESS_LOCAL_WRITE, &mr), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "past the end of its CUDA allocation"));
	close_dev(dev, pd);
	cu_fake_dev_free();
	cu_fake_install(); /* the function pointers back */
	ql__cuda_drv_override(NULL);
}

/* With cuMemcpy only (no HtoD/DtoH), the data moves through it. */
static void test_uva_only(void **state)
{
	struct vt_opts o = { .type = IBV_QPT_RC };
	struct vt_pair *pr;
	struct ql_mr *mr;
	struct ibv_wc wc;
	uint8_t *m;

	(void)state;
	cu_fake_install();
	m = cu_fake_dev_mem(8192);
	cu_drv.memcpy_htod = NULL;
	cu_drv.memcpy_dtoh = NULL;
	assert_int_equal(vt_pair_create(&vt_params[0], &o, &pr), 0);
	assert_int_equal(ql_mr_reg(pr->b.pd, m, 8192, VT_ACCESS_ALL, &mr), 0);
	pattern(pr->a.buf, 100, 4);
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 100, LK(&pr->a),
				       (uint64_t)(uintptr_t)m, ql_mr_rkey(mr), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(cu.dev.back, pr->a.buf, 100);
	assert_int_equal(cu.dev.any, 2);
	assert_int_equal(ql_mr_dereg(mr), 0);
	vt_pair_destroy(pr);
	cu_fake_dev_free();
	cu_fake_install();
	ql__cuda_drv_override(NULL);
}

/* soft+shm: device memory for remote access is refused (no other process
 * can reach it); as a local buffer it registers. */
static void test_shm_remote_refused(void **state)
{
	struct ql_pd *pd;
	struct ql_device *dev;
	struct ql_mr *mr = NULL;
	uint8_t *m;

	(void)state;
	cu_fake_install();
	m = cu_fake_dev_mem(8192);
	dev = open_dev(&vt_params[1], &pd);
	assert_int_equal(ql_mr_reg(pd, m, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
				   &mr),
			 -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "GPU device memory"));
	assert_int_equal(ql_mr_reg(pd, m, 8192, IBV_ACCESS_LOCAL_WRITE, &mr), 0);
	assert_int_equal(ql_mr_dereg(mr), 0);
	close_dev(dev, pd);
	cu_fake_dev_free();
	ql__cuda_drv_override(NULL);
}

/* ---- the real driver ---------------------------------------------------- */

/* On a machine with a GPU (scripts/gpu-check.sh runs this test: label
 * gpu), real device memory from cuMemAlloc on soft://loop: a WRITE lands
 * (read back with cuMemcpyDtoH), a READ returns what cuMemcpyHtoD put
 * there, an atomic is refused. Skipped, saying why, without a GPU. */
static void test_real_gpu(void **state)
{
	const struct ql__cuda_drv *drv;
	struct vt_opts o = { .type = IBV_QPT_RC };
	uint8_t host[4096];
	struct vt_pair *pr;
	struct ql_mr *mr;
	struct ibv_wc wc;
	uint64_t raw = 0, d;

	(void)state;
	ql__cuda_drv_override(NULL);
	if (ql__cuda_enter("test_soft_devmem", 0, &drv)) {
		print_message("[     SKIP ] no GPU: %s\n", ql_error_detail());
		skip();
	}
	assert_int_equal(drv->mem_alloc(&raw, DEV_LEN), 0);
	ql__cuda_ctx_leave(drv);
	d = raw;
	assert_int_equal(vt_pair_create(&vt_params[0], &o, &pr), 0);
	assert_int_equal(ql_mr_reg(pr->b.pd, (void *)(uintptr_t)d, DEV_LEN, VT_ACCESS_ALL, &mr), 0);

	pattern(pr->a.buf, sizeof(host), 21);
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, sizeof(host), LK(&pr->a), d + 100,
				       ql_mr_rkey(mr), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(ql__cuda_ctx_enter(drv, 0), 0);
	assert_int_equal(drv->memcpy_dtoh(host, d + 100, sizeof(host)), 0);
	ql__cuda_ctx_leave(drv);
	assert_memory_equal(host, pr->a.buf, sizeof(host));

	pattern(host, sizeof(host), 77);
	assert_int_equal(ql__cuda_ctx_enter(drv, 0), 0);
	assert_int_equal(drv->memcpy_htod(d + 8192, host, sizeof(host)), 0);
	ql__cuda_ctx_leave(drv);
	memset(pr->a.buf, 0, sizeof(host));
	assert_int_equal(vt_post_read(pr->a.qp, 2, pr->a.buf, sizeof(host), LK(&pr->a), d + 8192,
				      ql_mr_rkey(mr), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_memory_equal(pr->a.buf, host, sizeof(host));

	assert_int_equal(vt_post_atomic(pr->a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 3, pr->a.buf,
					LK(&pr->a), d, ql_mr_rkey(mr), 1, 0, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 3, IBV_WC_REM_ACCESS_ERR, -1);

	assert_int_equal(ql_mr_dereg(mr), 0);
	vt_pair_destroy(pr);
	assert_int_equal(ql__cuda_ctx_enter(drv, 0), 0);
	drv->mem_free(raw);
	ql__cuda_ctx_leave(drv);
}

#define DATA_TESTS(s)                                                                     \
	cmocka_unit_test_setup_teardown(test_write_into_device, s, teardown),             \
		cmocka_unit_test_setup_teardown(test_read_from_device, s, teardown),      \
		cmocka_unit_test_setup_teardown(test_send_into_device_recv, s, teardown), \
		cmocka_unit_test_setup_teardown(test_local_device_sges, s, teardown),     \
		cmocka_unit_test_setup_teardown(test_atomic_refused, s, teardown),        \
		cmocka_unit_test_setup_teardown(test_host_path_untouched, s, teardown),   \
		cmocka_unit_test_setup_teardown(test_copy_failure, s, teardown),          \
		cmocka_unit_test_setup_teardown(test_device_path_hot, s, teardown)

int main(void)
{
	const struct CMUnitTest loop[] = { DATA_TESTS(setup_loop) };
	const struct CMUnitTest udp[] = { DATA_TESTS(setup_udp) };
	const struct CMUnitTest reg[] = {
		cmocka_unit_test(test_driver_abi_values),
		cmocka_unit_test(test_reg_needs_a_copy_path),
		cmocka_unit_test(test_uva_only),
		cmocka_unit_test(test_shm_remote_refused),
		cmocka_unit_test(test_real_gpu),
	};
	int fails = cmocka_run_group_tests_name("soft://loop", loop, NULL, NULL);

	fails += cmocka_run_group_tests_name("soft+udp", udp, NULL, NULL);
	fails += cmocka_run_group_tests_name("registration", reg, NULL, NULL);
	return fails;
}
