/* SPDX-License-Identifier: MIT */
/*
 * Error semantics: local and remote protection, RNR, retry, receive errors,
 * flushing, CQ overrun, and invalid posts, on RC and UC.
 */
#include "verbs_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LK(e) ql_mr_lkey((e)->mr)
#define RK(e) ql_mr_rkey((e)->mr)
#define RADDR(e, off) ((uint64_t)(uintptr_t)((e)->buf + (off)))
#define BADKEY(k) ((k) ^ 0x00a5a500u)

/* Responder counters: the soft NIC's ql_device_counters; a real device
 * keeps none (its own are in sysfs), so there the checks are left out. */
#define CNT_EQ(pr, a, b)                            \
	do {                                        \
		if (vt_has_counters((pr)->param))   \
			assert_int_equal((a), (b)); \
	} while (0)
#define CNT_TRUE(pr, x)                           \
	do {                                      \
		if (vt_has_counters((pr)->param)) \
			assert_true(x);           \
	} while (0)

/* A pair built inside a test (custom options); the teardown frees it. */
static struct vt_pair *cur;

static int td_cur(void **state)
{
	vt_pair_destroy(cur);
	cur = NULL;
	return 0;
}

static struct vt_pair *pair_with(void **state, enum ibv_qp_type t, int cqe, unsigned int b_access,
				 uint8_t a_retry, uint8_t a_timeout, uint8_t a_rnr_retry,
				 uint8_t b_min_rnr)
{
	const struct vt_param *p = *state;
	struct vt_opts o = { .type = t, .cqe = cqe, .have_conn = true };

	ql_qp_connect_opts_default(&o.conn_a);
	ql_qp_connect_opts_default(&o.conn_b);
	o.conn_a.retry_cnt = a_retry;
	o.conn_a.timeout = a_timeout;
	o.conn_a.rnr_retry = a_rnr_retry;
	o.conn_b.min_rnr_timer = b_min_rnr;
	o.conn_b.access = b_access;
	assert_null(cur);
	assert_int_equal(vt_pair_create(p, &o, &cur), 0);
	return cur;
}

static struct vt_pair *pair_simple(void **state, enum ibv_qp_type t)
{
	return pair_with(state, t, 0, VT_ACCESS_ALL, 7, 14, 7, 12);
}

#define assert_state(qp, s) assert_int_equal(ql_qp_state(qp), (s))

/* What Linux rxe does differently (docs/ibv-provider.md); accepted on ibv
 * devices only, and noted on the output when seen. */
#define RXE_LKEY "a bad L_Key (rxe: local QP operation error)"
#define RXE_NO_SQE "UC send-side error (rxe has no SQE: the QP goes to ERR)"
#define RXE_RECV_LEN "receive buffer too small (rxe 6.1: a malformed receive WQE)"
#define RXE_RECV_KEY "receive SGE with a bad L_Key (rxe: a malformed receive WQE)"

/* Back to RTS after an error: both ends through RESET, as a real
 * application reconnects (PSNs start over on both sides). */
static void reconnect(struct vt_pair *pr)
{
	const struct vt_opts *o = &pr->opts;

	assert_int_equal(vt_modify_state(pr->a.qp, IBV_QPS_RESET), 0);
	assert_int_equal(vt_modify_state(pr->b.qp, IBV_QPS_RESET), 0);
	assert_int_equal(vt_end_connect(&pr->a, &pr->b, o->have_conn ? &o->conn_a : NULL), 0);
	assert_int_equal(vt_end_connect(&pr->b, &pr->a, o->have_conn ? &o->conn_b : NULL), 0);
}

/* ---- local errors --------------------------------------------------- */

static void local_error_then_flush(void **state, enum ibv_qp_type t)
{
	struct vt_pair *pr = pair_simple(state, t);
	struct ibv_sge s1 = { (uintptr_t)pr->a.buf, 32, BADKEY(LK(&pr->a)) };
	struct ibv_sge s2 = { (uintptr_t)pr->a.buf, 32, LK(&pr->a) };
	struct ibv_send_wr w2 = {
		.wr_id = 2,
		.sg_list = &s2,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.wr.rdma = { RADDR(&pr->b, 64), RK(&pr->b) }, /* unsignaled: flushed anyway */
	};
	struct ibv_send_wr w1 = {
		.wr_id = 1,
		.next = &w2,
		.sg_list = &s1,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { RADDR(&pr->b, 0), RK(&pr->b) },
	};
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;

	memset(pr->a.buf, 0x77, 32);
	assert_int_equal(ql_qp_post_send(pr->a.qp, &w1, &bad), 0);
	vt_expect_wc_alt(pr->param, pr->a.scq, &wc, 1, IBV_WC_LOC_PROT_ERR, IBV_WC_LOC_QP_OP_ERR,
			 RXE_LKEY);
	assert_int_equal(wc.qp_num, ql_qp_num(pr->a.qp));
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_WR_FLUSH_ERR, -1);
	if (t == IBV_QPT_RC)
		assert_state(pr->a.qp, IBV_QPS_ERR);
	else
		vt_state_alt(pr->param, pr->a.qp, IBV_QPS_SQE, IBV_QPS_ERR, RXE_NO_SQE);
	assert_int_equal(pr->b.buf[0], 0);
	assert_int_equal(pr->b.buf[64], 0);
	assert_state(pr->b.qp, IBV_QPS_RTS);
}

static void test_loc_bad_lkey_rc(void **state)
{
	local_error_then_flush(state, IBV_QPT_RC);
}

static void test_loc_bad_lkey_uc(void **state)
{
	local_error_then_flush(state, IBV_QPT_UC);
}

static void test_loc_outside_mr(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	struct ql_mr *mr;
	struct ibv_wc wc;

	/* an MR over the middle of the buffer; the SGE runs one byte past it */
	assert_int_equal(ql_mr_reg(pr->a.pd, pr->a.buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE, &mr),
			 0);
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf + 4096 + 100, 3997, ql_mr_lkey(mr),
				       RADDR(&pr->b, 0), RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_LOC_PROT_ERR, -1);
	assert_state(pr->a.qp, IBV_QPS_ERR);
	/* and one starting before it */
	reconnect(pr);
	assert_int_equal(vt_post_send(pr->a.qp, 2, pr->a.buf + 4095, 8, ql_mr_lkey(mr),
				      IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_LOC_PROT_ERR, -1);
	/* the exact extent is fine */
	reconnect(pr);
	assert_int_equal(vt_post_write(pr->a.qp, 3, pr->a.buf + 4096, 4096, ql_mr_lkey(mr),
				       RADDR(&pr->b, 0), RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(ql_qp_destroy(pr->a.qp), 0);
	pr->a.qp = NULL;
	assert_int_equal(ql_mr_dereg(mr), 0);
}

/* The software NICs' own checks of ql_mr_reg, past the verbs layer's:
 * max_mr_size (2^46 bytes) and the access flags they implement (MW_BIND is
 * not one); each refusal names the provider (a real device has its own). */
static void test_mr_reg_soft_limits(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	struct ql_mr *mr = NULL;
	const char *who = pr->param->udp ? "soft+udp" : "soft";

	if (pr->param->ibv)
		skip();
	assert_int_equal(ql_mr_reg(pr->a.pd, pr->a.buf, (1ull << 46) + 1, IBV_ACCESS_LOCAL_WRITE,
				   &mr),
			 -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "exceeds max_mr_size"));
	assert_int_equal(ql_mr_reg(pr->a.pd, pr->a.buf, 4096,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND, &mr),
			 -EOPNOTSUPP);
	assert_non_null(strstr(ql_error_detail(), "access flags 0x10 not supported by"));
	assert_string_equal(strrchr(ql_error_detail(), ' ') + 1, who);
	assert_null(mr);
	/* a page with every implemented flag passes them */
	assert_int_equal(ql_mr_reg(pr->a.pd, pr->a.buf, 4096,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
					   IBV_ACCESS_RELAXED_ORDERING,
				   &mr),
			 0);
	assert_int_equal(ql_mr_dereg(mr), 0);
}

/* The software NICs' checks of ql_qp_create: RC and UC only (the refusal
 * names the provider), 1..16384 WRs per queue, 16 SGEs per WR, 256 bytes
 * inline (docs/soft-provider.md, limits). */
static void test_qp_create_soft_limits(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	const char *who = pr->param->udp ? "soft+udp" : "soft";
	struct ql_qp_init_attr ia;
	struct ql_qp *qp = NULL;
	char want[64];

	if (pr->param->ibv)
		skip();
	ia = (struct ql_qp_init_attr){
		.send_cq = pr->a.scq,
		.recv_cq = pr->a.rcq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD
	};
	assert_int_equal(ql_qp_create(pr->a.pd, &ia, &qp), -EOPNOTSUPP);
	snprintf(want, sizeof(want), "%s: QP type %d not supported", who, IBV_QPT_UD);
	assert_non_null(strstr(ql_error_detail(), want));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_recv_wr = 16385;
	assert_int_equal(ql_qp_create(pr->a.pd, &ia, &qp), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "max_send_wr/max_recv_wr must be 1..16384"));
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 17;
	assert_int_equal(ql_qp_create(pr->a.pd, &ia, &qp), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "at most 16 SGEs per WR"));
	ia.cap.max_send_sge = 1;
	ia.cap.max_inline_data = 257;
	assert_int_equal(ql_qp_create(pr->a.pd, &ia, &qp), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "max_inline_data above 256"));
	assert_null(qp);
	/* the limits themselves are granted */
	ia.cap = (struct ibv_qp_cap){ .max_send_wr = 16384,
				      .max_recv_wr = 1,
				      .max_send_sge = 16,
				      .max_recv_sge = 16,
				      .max_inline_data = 256 };
	assert_int_equal(ql_qp_create(pr->a.pd, &ia, &qp), 0);
	assert_int_equal(ql_qp_destroy(qp), 0);
}

static void test_loc_read_into_readonly_mr(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	struct ql_mr *ro;
	struct ibv_wc wc;

	assert_int_equal(ql_mr_reg(pr->a.pd, pr->a.buf + 8192, 4096, 0, &ro), 0);
	memset(pr->b.buf, 0x99, 64);
	assert_int_equal(vt_post_read(pr->a.qp, 1, pr->a.buf + 8192, 64, ql_mr_lkey(ro),
				      RADDR(&pr->b, 0), RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_LOC_PROT_ERR, -1);
	assert_state(pr->a.qp, IBV_QPS_ERR);
	assert_int_equal(pr->a.buf[8192], 0);
	assert_int_equal(ql_qp_destroy(pr->a.qp), 0);
	pr->a.qp = NULL;
	assert_int_equal(ql_mr_dereg(ro), 0);
}

static void test_loc_atomic_into_readonly_mr(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	struct ql_mr *ro;
	struct ibv_wc wc;

	assert_int_equal(ql_mr_reg(pr->a.pd, pr->a.buf + 8192, 4096, IBV_ACCESS_REMOTE_READ, &ro),
			 0);
	assert_int_equal(vt_post_atomic(pr->a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, pr->a.buf + 8192,
					ql_mr_lkey(ro), RADDR(&pr->b, 0), RK(&pr->b), 1, 0,
					IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_LOC_PROT_ERR, -1);
	assert_state(pr->a.qp, IBV_QPS_ERR);
	assert_int_equal(pr->a.buf[8192], 0);
	assert_int_equal(ql_qp_destroy(pr->a.qp), 0);
	pr->a.qp = NULL;
	assert_int_equal(ql_mr_dereg(ro), 0);
}

/* ---- remote access, RC: NAK ----------------------------------------- */

/* Post one op that the responder must refuse; check the RC outcome: the
 * NAK's status at the requester (REM_ACCESS_ERR for an rkey, bounds or MR
 * rights violation; REM_INV_REQ_ERR for an operation the responder QP does
 * not enable), both QPs in ERR (IB spec: a Class C responder error takes
 * the responder QP to the Error state too), a's receives flushed, b's too. */
static void expect_rc_nak(struct vt_pair *pr, struct ibv_send_wr *wr, enum ibv_wc_status st,
			  const uint8_t *target, uint8_t untouched)
{
	struct ql_device_counters c0, c1;
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;

	vt_counters(pr->b.dev, &c0);
	assert_int_equal(vt_post_recv(pr->a.qp, 90, pr->a.buf + 60000, 64, LK(&pr->a)), 0);
	assert_int_equal(vt_post_recv(pr->b.qp, 91, pr->b.buf + 60000, 64, LK(&pr->b)), 0);
	assert_int_equal(ql_qp_post_send(pr->a.qp, wr, &bad), 0);
	vt_expect_wc(pr->a.scq, &wc, wr->wr_id, st, -1);
	assert_state(pr->a.qp, IBV_QPS_ERR);
	/* the QP going to ERR flushes its receive queue too */
	vt_expect_wc(pr->a.rcq, &wc, 90, IBV_WC_WR_FLUSH_ERR, -1);
	/* and so does the responder's */
	vt_expect_wc(pr->b.rcq, &wc, 91, IBV_WC_WR_FLUSH_ERR, -1);
	assert_state(pr->b.qp, IBV_QPS_ERR);
	vt_counters(pr->b.dev, &c1);
	if (st == IBV_WC_REM_ACCESS_ERR)
		CNT_EQ(pr, c1.rc_nak_access, c0.rc_nak_access + 1);
	else
		CNT_EQ(pr, c1.rc_nak_inv_req, c0.rc_nak_inv_req + 1);
	if (target)
		assert_int_equal(*target, untouched);
}

static void expect_rc_access_nak(struct vt_pair *pr, struct ibv_send_wr *wr, const uint8_t *target,
				 uint8_t untouched)
{
	expect_rc_nak(pr, wr, IBV_WC_REM_ACCESS_ERR, target, untouched);
}

static void write_wr(struct ibv_send_wr *wr, struct ibv_sge *sge, struct vt_end *from, uint32_t len,
		     uint64_t raddr, uint32_t rkey)
{
	sge->addr = (uintptr_t)from->buf;
	sge->length = len;
	sge->lkey = LK(from);
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = 0xabc;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_RDMA_WRITE;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
}

static void test_rc_bad_rkey(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	memset(pr->a.buf, 0x31, 64);
	write_wr(&wr, &sge, &pr->a, 64, RADDR(&pr->b, 0), BADKEY(RK(&pr->b)));
	expect_rc_access_nak(pr, &wr, pr->b.buf, 0);
	/* the lkey is not an rkey either (where they differ: the IB spec lets
	 * them be equal, as on rxe) */
	if (LK(&pr->b) == RK(&pr->b)) {
		vt_note(pr->param, "lkey == rkey (0x%x): the lkey-as-rkey case does not apply",
			LK(&pr->b));
		return;
	}
	reconnect(pr);
	write_wr(&wr, &sge, &pr->a, 64, RADDR(&pr->b, 0), LK(&pr->b));
	expect_rc_access_nak(pr, &wr, pr->b.buf, 0);
}

static void test_rc_out_of_bounds(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	memset(pr->a.buf, 0x32, 64);
	write_wr(&wr, &sge, &pr->a, 16, RADDR(&pr->b, VT_BUF_LEN - 8), RK(&pr->b));
	expect_rc_access_nak(pr, &wr, pr->b.buf + VT_BUF_LEN - 8, 0);

	/* below the start */
	reconnect(pr);
	write_wr(&wr, &sge, &pr->a, 16, RADDR(&pr->b, 0) - 8, RK(&pr->b));
	expect_rc_access_nak(pr, &wr, pr->b.buf, 0);

	/* a READ past the end */
	reconnect(pr);
	write_wr(&wr, &sge, &pr->a, 4096, RADDR(&pr->b, VT_BUF_LEN - 4095), RK(&pr->b));
	wr.opcode = IBV_WR_RDMA_READ;
	expect_rc_access_nak(pr, &wr, NULL, 0);
}

/* An extra MR over b's buffer with the given rights. */
static struct ql_mr *b_mr(struct vt_pair *pr, size_t off, int access)
{
	struct ql_mr *mr;

	assert_int_equal(ql_mr_reg(pr->b.pd, pr->b.buf + off, 4096, access, &mr), 0);
	return mr;
}

static void test_rc_mr_rights(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	struct ql_mr *no_w =
		b_mr(pr, 8192,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	struct ql_mr *no_r =
		b_mr(pr, 16384,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	struct ql_mr *no_a =
		b_mr(pr, 24576,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	memset(pr->a.buf, 0x33, 64);
	write_wr(&wr, &sge, &pr->a, 64, RADDR(&pr->b, 8192), ql_mr_rkey(no_w));
	expect_rc_access_nak(pr, &wr, pr->b.buf + 8192, 0);

	reconnect(pr);
	write_wr(&wr, &sge, &pr->a, 64, RADDR(&pr->b, 16384), ql_mr_rkey(no_r));
	wr.opcode = IBV_WR_RDMA_READ;
	expect_rc_access_nak(pr, &wr, NULL, 0);

	reconnect(pr);
	write_wr(&wr, &sge, &pr->a, 8, RADDR(&pr->b, 24576), ql_mr_rkey(no_a));
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = RADDR(&pr->b, 24576);
	wr.wr.atomic.rkey = ql_mr_rkey(no_a);
	wr.wr.atomic.compare_add = 5;
	expect_rc_access_nak(pr, &wr, pr->b.buf + 24576, 0);

	/* the rights that are there work */
	reconnect(pr);
	{
		struct ibv_wc wc;

		assert_int_equal(vt_post_write(pr->a.qp, 7, pr->a.buf, 64, LK(&pr->a),
					       RADDR(&pr->b, 16384), ql_mr_rkey(no_r),
					       IBV_SEND_SIGNALED),
				 0);
		vt_expect_wc(pr->a.scq, &wc, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		assert_int_equal(pr->b.buf[16384], 0x33);
	}
	assert_int_equal(ql_mr_dereg(no_w), 0);
	assert_int_equal(ql_mr_dereg(no_r), 0);
	assert_int_equal(ql_mr_dereg(no_a), 0);
}

static void test_rc_qp_access_flags(void **state)
{
	/* the responder QP grants only REMOTE_READ */
	struct vt_pair *pr = pair_with(state, IBV_QPT_RC, 0,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 7, 14, 7,
				       12);
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;

	/* An operation the responder QP does not enable is an invalid request
	 * for it (IB spec; "remote invalid request": the operation is not
	 * supported by this receive queue), not an rkey violation. */
	memset(pr->a.buf, 0x34, 64);
	write_wr(&wr, &sge, &pr->a, 64, RADDR(&pr->b, 0), RK(&pr->b));
	expect_rc_nak(pr, &wr, IBV_WC_REM_INV_REQ_ERR, pr->b.buf, 0);

	reconnect(pr);
	write_wr(&wr, &sge, &pr->a, 8, RADDR(&pr->b, 0), RK(&pr->b));
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.remote_addr = RADDR(&pr->b, 0);
	wr.wr.atomic.rkey = RK(&pr->b);
	wr.wr.atomic.compare_add = 0;
	wr.wr.atomic.swap = 0x1111;
	expect_rc_nak(pr, &wr, IBV_WC_REM_INV_REQ_ERR, pr->b.buf, 0);

	/* READ is granted */
	reconnect(pr);
	pr->b.buf[100] = 0x5f;
	assert_int_equal(vt_post_read(pr->a.qp, 3, pr->a.buf, 128, LK(&pr->a), RADDR(&pr->b, 0),
				      RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_int_equal(pr->a.buf[100], 0x5f);
}

static void test_rc_qp_access_no_read(void **state)
{
	struct vt_pair *pr = pair_with(state, IBV_QPT_RC, 0,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7, 14, 7,
				       12);
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	write_wr(&wr, &sge, &pr->a, 64, RADDR(&pr->b, 0), RK(&pr->b));
	wr.opcode = IBV_WR_RDMA_READ;
	expect_rc_nak(pr, &wr, IBV_WC_REM_INV_REQ_ERR, NULL, 0);
}

/* ---- remote access, UC: silently dropped ---------------------------- */

static void expect_uc_drop(struct vt_pair *pr, uint32_t len, uint64_t raddr, uint32_t rkey,
			   const uint8_t *target)
{
	struct ql_device_counters c0, c1;
	struct ibv_wc wc;

	vt_counters(pr->b.dev, &c0);
	memset(pr->a.buf, 0x41, len);
	assert_int_equal(vt_post_write(pr->a.qp, 5, pr->a.buf, len, LK(&pr->a), raddr, rkey,
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 5, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_counters(pr->b.dev, &c1);
	CNT_EQ(pr, c1.uc_drop_access, c0.uc_drop_access + 1);
	assert_int_equal(*target, 0);
	assert_state(pr->a.qp, IBV_QPS_RTS);
	assert_state(pr->b.qp, IBV_QPS_RTS);
}

static void test_uc_access_drops(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_UC);
	struct ql_mr *no_w = b_mr(pr, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_wc wc;

	expect_uc_drop(pr, 64, RADDR(&pr->b, 0), BADKEY(RK(&pr->b)), pr->b.buf);
	expect_uc_drop(pr, 16, RADDR(&pr->b, VT_BUF_LEN - 8), RK(&pr->b),
		       pr->b.buf + VT_BUF_LEN - 8);
	expect_uc_drop(pr, 64, RADDR(&pr->b, 8192), ql_mr_rkey(no_w), pr->b.buf + 8192);

	/* the QPs still work */
	assert_int_equal(vt_post_write(pr->a.qp, 6, pr->a.buf, 64, LK(&pr->a), RADDR(&pr->b, 0),
				       RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 6, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(pr->b.buf[0], 0x41);
	assert_int_equal(ql_mr_dereg(no_w), 0);
}

static void test_uc_qp_access_drop(void **state)
{
	struct vt_pair *pr = pair_with(state, IBV_QPT_UC, 0, IBV_ACCESS_LOCAL_WRITE, 7, 14, 7, 12);

	expect_uc_drop(pr, 64, RADDR(&pr->b, 0), RK(&pr->b), pr->b.buf);
}

static void test_uc_write_imm_bad_rkey_keeps_recv(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_UC);
	struct ql_device_counters c0, c1;
	struct ibv_wc wc;

	assert_int_equal(vt_post_recv(pr->b.qp, 70, pr->b.buf + 4096, 64, LK(&pr->b)), 0);
	vt_counters(pr->b.dev, &c0);
	memset(pr->a.buf, 0x42, 64);
	assert_int_equal(vt_post_write_imm(pr->a.qp, 1, pr->a.buf, 64, LK(&pr->a), RADDR(&pr->b, 0),
					   BADKEY(RK(&pr->b)), htonl(1), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_counters(pr->b.dev, &c1);
	CNT_EQ(pr, c1.uc_drop_access, c0.uc_drop_access + 1);
	assert_int_equal(pr->b.buf[0], 0);
	/* the dropped message consumed no receive: the next one gets it */
	vt_expect_none(pr->b.rcq, 5);
	assert_int_equal(vt_post_send_imm(pr->a.qp, 2, pr->a.buf, 10, LK(&pr->a), htonl(2),
					  IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->b.rcq, &wc, 70, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_int_equal(wc.imm_data, htonl(2));
}

static void test_zero_length_write_ignores_rkey(void **state)
{
	enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC };

	for (int i = 0; i < 2; i++) {
		struct vt_pair *pr = pair_simple(state, types[i]);
		struct ibv_wc wc;

		assert_int_equal(vt_post_write(pr->a.qp, 1, NULL, 0, 0, 0, 0xdeadbeef,
					       IBV_SEND_SIGNALED),
				 0);
		vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		assert_state(pr->a.qp, IBV_QPS_RTS);
		vt_pair_destroy(cur);
		cur = NULL;
	}
}

/* ---- atomics -------------------------------------------------------- */

static void test_atomic_misaligned(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	struct ql_device_counters c0, c1;
	struct ibv_wc wc;
	int ret;

	vt_counters(pr->b.dev, &c0);
	memset(pr->b.buf, 0, 16);
	ret = vt_post_atomic(pr->a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, pr->a.buf, LK(&pr->a),
			     RADDR(&pr->b, 4), RK(&pr->b), 1, 0, IBV_SEND_SIGNALED);
	if (ret == -EINVAL && pr->param->ibv) {
		/* a requester may refuse it at once; rxe does */
		vt_note(pr->param, "misaligned atomic refused when posted (-EINVAL)");
		assert_state(pr->a.qp, IBV_QPS_RTS);
	} else {
		assert_int_equal(ret, 0);
		vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_REM_INV_REQ_ERR, -1);
		assert_state(pr->a.qp, IBV_QPS_ERR);
		/* a Class C error: the responder goes to ERR too */
		assert_state(pr->b.qp, IBV_QPS_ERR);
		vt_counters(pr->b.dev, &c1);
		CNT_EQ(pr, c1.rc_nak_inv_req, c0.rc_nak_inv_req + 1);
	}
	for (int i = 0; i < 16; i++)
		assert_int_equal(pr->b.buf[i], 0);
}

static void test_atomic_local_len(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	struct ibv_sge sge = { (uintptr_t)pr->a.buf, 4, LK(&pr->a) };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = { .remote_addr = RADDR(&pr->b, 0), .compare_add = 0, .swap = 7,
			       .rkey = RK(&pr->b) },
	}, *bad;
	struct ibv_wc wc;
	int ret = ql_qp_post_send(pr->a.qp, &wr, &bad);

	if (ret == -EINVAL && pr->param->ibv) {
		vt_note(pr->param, "atomic with a 4-byte SGE refused when posted (-EINVAL)");
		assert_ptr_equal(bad, &wr);
		assert_state(pr->a.qp, IBV_QPS_RTS);
		return;
	}
	assert_int_equal(ret, 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_LOC_LEN_ERR, -1);
	assert_state(pr->a.qp, IBV_QPS_ERR);
}

/* ---- invalid posts -------------------------------------------------- */

/* A send WR that must never execute: refused when posted (-EINVAL with
 * bad_wr set, as the soft NIC does for every check below), or, on a
 * libibverbs device that checks it only when executing (rxe, for some),
 * completed in error; with may_run, a device may even execute it (noted).
 * Either way the connection is fresh afterwards. */
static void expect_refused(struct vt_pair *pr, struct ibv_send_wr *wr, const char *what,
			   bool may_run)
{
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;
	int ret = ql_qp_post_send(pr->a.qp, wr, &bad);

	if (ret == 0 && pr->param->ibv) {
		assert_int_equal(vt_poll_one(pr->a.scq, &wc, VT_TIMEOUT_MS), 1);
		assert_int_equal(wc.wr_id, wr->wr_id);
		if (!may_run)
			assert_int_not_equal(wc.status, IBV_WC_SUCCESS);
		vt_note(pr->param, "%s: accepted when posted, completed with %s", what,
			ibv_wc_status_str(wc.status));
		reconnect(pr);
		return;
	}
	if (ret != -EINVAL)
		fail_msg("%s: posting returned %d, expected -EINVAL", what, ret);
	assert_ptr_equal(bad, wr);
}

static void test_post_invalid(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	uint32_t nsge = pr->a.init.cap.max_send_sge;
	uint32_t max_inline = pr->a.init.cap.max_inline_data;
	struct ibv_sge sges[64];
	uint8_t *big = calloc(1, max_inline + 1);
	struct ibv_send_wr wr, *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_wc wc;

	assert_non_null(big);
	assert_true(nsge < 64);
	for (int i = 0; i < 64; i++) {
		sges[i].addr = (uintptr_t)pr->a.buf + i * 8;
		sges[i].length = 8;
		sges[i].lkey = LK(&pr->a);
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.sg_list = sges;
	wr.num_sge = (int)nsge + 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = RADDR(&pr->b, 0);
	wr.wr.rdma.rkey = RK(&pr->b);
	bad = NULL;
	assert_int_equal(ql_qp_post_send(pr->a.qp, &wr, &bad), -EINVAL);
	assert_ptr_equal(bad, &wr);

	/* inline larger than the QP's max_inline_data */
	{
		struct ibv_sge s = { (uintptr_t)big, max_inline + 1, 0 };

		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
		bad = NULL;
		assert_int_equal(ql_qp_post_send(pr->a.qp, &wr, &bad), -EINVAL);
		assert_ptr_equal(bad, &wr);
		/* also when split over SGEs */
		sges[0].addr = (uintptr_t)big;
		sges[0].length = max_inline;
		sges[0].lkey = 0;
		sges[1].addr = (uintptr_t)big;
		sges[1].length = 1;
		sges[1].lkey = 0;
		wr.sg_list = sges;
		wr.num_sge = 2;
		assert_int_equal(ql_qp_post_send(pr->a.qp, &wr, &bad), -EINVAL);
		sges[0].addr = (uintptr_t)pr->a.buf;
		sges[0].length = 8;
		sges[0].lkey = LK(&pr->a);
		sges[1].addr = (uintptr_t)pr->a.buf + 8;
		sges[1].length = 8;
		sges[1].lkey = LK(&pr->a);
	}

	/* unknown opcode */
	wr.sg_list = sges;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = (enum ibv_wr_opcode)0x55;
	expect_refused(pr, &wr, "unknown opcode 0x55", false);

	/* atomics take exactly one SGE */
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.num_sge = 2;
	wr.wr.atomic.remote_addr = RADDR(&pr->b, 0);
	wr.wr.atomic.rkey = RK(&pr->b);
	wr.wr.atomic.compare_add = 1;
	/* (rxe runs it, on the first 8 bytes: the IB spec wants one SGE) */
	expect_refused(pr, &wr, "atomic with 2 SGEs", true);
	memset(pr->b.buf, 0, 8);
	wr.num_sge = 0;
	expect_refused(pr, &wr, "atomic with no SGE", false);

	/* nothing of the above ran */
	vt_expect_none(pr->a.scq, 5);
	assert_state(pr->a.qp, IBV_QPS_RTS);
	assert_true(((uint64_t *)pr->b.buf)[0] == 0);

	/* a chain stops at the bad WR; the ones before it are posted */
	{
		struct ibv_send_wr w2 = wr, w1;

		/* too many SGEs: refused when posted by every provider */
		w2.wr_id = 2;
		w2.opcode = IBV_WR_RDMA_WRITE;
		w2.num_sge = (int)nsge + 1;
		w2.wr.rdma.remote_addr = RADDR(&pr->b, 0);
		w2.wr.rdma.rkey = RK(&pr->b);
		memset(&w1, 0, sizeof(w1));
		w1.wr_id = 1;
		w1.next = &w2;
		w1.sg_list = sges;
		w1.num_sge = 1;
		w1.opcode = IBV_WR_RDMA_WRITE;
		w1.send_flags = IBV_SEND_SIGNALED;
		w1.wr.rdma.remote_addr = RADDR(&pr->b, 0);
		w1.wr.rdma.rkey = RK(&pr->b);
		memset(pr->a.buf, 0x61, 8);
		bad = NULL;
		assert_int_equal(ql_qp_post_send(pr->a.qp, &w1, &bad), -EINVAL);
		assert_ptr_equal(bad, &w2);
		vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		assert_int_equal(pr->b.buf[0], 0x61);
		vt_expect_none(pr->a.scq, 5);
	}

	/* receive with too many SGEs */
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 3;
	rwr.sg_list = sges;
	rwr.num_sge = (int)pr->a.init.cap.max_recv_sge + 1;
	rbad = NULL;
	assert_true(rwr.num_sge <= 64);
	assert_int_equal(ql_qp_post_recv(pr->a.qp, &rwr, &rbad), -EINVAL);
	assert_ptr_equal(rbad, &rwr);
	free(big);
}

static void test_post_invalid_uc(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_UC);
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD,
	};
	struct ibv_sge sge = { (uintptr_t)pr->a.buf, 8, LK(&pr->a) };
	struct ibv_wc wc;

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct ibv_send_wr wr = {
			.wr_id = i,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = ops[i],
			.send_flags = IBV_SEND_SIGNALED,
		};

		if (ops[i] == IBV_WR_RDMA_READ) {
			wr.wr.rdma.remote_addr = RADDR(&pr->b, 0);
			wr.wr.rdma.rkey = RK(&pr->b);
		} else {
			wr.wr.atomic.remote_addr = RADDR(&pr->b, 0);
			wr.wr.atomic.rkey = RK(&pr->b);
		}
		expect_refused(pr, &wr, ops[i] == IBV_WR_RDMA_READ ? "READ on UC" : "atomic on UC",
			       false);
	}
	assert_int_equal(vt_post_write(pr->a.qp, 9, pr->a.buf, 8, LK(&pr->a), RADDR(&pr->b, 0),
				       RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_state(pr->a.qp, IBV_QPS_RTS);
}

/* ---- receiver not ready --------------------------------------------- */

static void rnr_exceeded(void **state, bool write_imm)
{
	/* rnr_retry 2, responder's RNR timer 10 us */
	struct vt_pair *pr = pair_with(state, IBV_QPT_RC, 0, VT_ACCESS_ALL, 7, 14, 2, 1);
	struct ql_device_counters c0, c1;
	struct ibv_wc wc;

	vt_counters(pr->b.dev, &c0);
	memset(pr->a.buf, 0x51, 32);
	if (write_imm)
		assert_int_equal(vt_post_write_imm(pr->a.qp, 1, pr->a.buf, 32, LK(&pr->a),
						   RADDR(&pr->b, 0), RK(&pr->b), htonl(3),
						   IBV_SEND_SIGNALED),
				 0);
	else
		assert_int_equal(
			vt_post_send(pr->a.qp, 1, pr->a.buf, 32, LK(&pr->a), IBV_SEND_SIGNALED), 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_RNR_RETRY_EXC_ERR, -1);
	assert_state(pr->a.qp, IBV_QPS_ERR);
	assert_state(pr->b.qp, IBV_QPS_RTS);
	vt_counters(pr->b.dev, &c1);
	CNT_TRUE(pr, c1.rc_nak_rnr > c0.rc_nak_rnr);
	/* at most the first try and rnr_retry retries were refused */
	CNT_TRUE(pr, c1.rc_nak_rnr - c0.rc_nak_rnr <= 3);
	vt_expect_none(pr->b.rcq, 5);
}

static void test_rnr_exceeded_send(void **state)
{
	rnr_exceeded(state, false);
}

static void test_rnr_exceeded_write_imm(void **state)
{
	rnr_exceeded(state, true);
}

static void test_rnr_then_recv(void **state)
{
	/* rnr_retry 7: forever */
	struct vt_pair *pr = pair_with(state, IBV_QPT_RC, 0, VT_ACCESS_ALL, 7, 14, 7, 1);
	struct ql_device_counters c0, c1;
	struct ibv_wc wc;

	vt_counters(pr->b.dev, &c0);
	vt_fill(pr->a.buf, 200, 21);
	assert_int_equal(vt_post_send(pr->a.qp, 1, pr->a.buf, 200, LK(&pr->a), IBV_SEND_SIGNALED),
			 0);
	/* 30 ms of polling: far more than 7 retries of 10 us, still no error */
	vt_expect_none(pr->a.scq, 30);
	assert_state(pr->a.qp, IBV_QPS_RTS);
	vt_counters(pr->b.dev, &c1);
	CNT_TRUE(pr, c1.rc_nak_rnr > c0.rc_nak_rnr);

	assert_int_equal(vt_post_recv(pr->b.qp, 2, pr->b.buf + 1024, 256, LK(&pr->b)), 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->b.rcq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 200);
	assert_true(vt_check(pr->b.buf + 1024, 200, 21));
	vt_expect_none(pr->b.rcq, 5);
}

static void test_rnr_stall_keeps_order(void **state)
{
	struct vt_pair *pr = pair_with(state, IBV_QPT_RC, 0, VT_ACCESS_ALL, 7, 14, 7, 1);
	struct ibv_wc wc;

	memset(pr->a.buf, 0x66, 64);
	assert_int_equal(vt_post_send(pr->a.qp, 1, pr->a.buf, 16, LK(&pr->a), IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(vt_post_write(pr->a.qp, 2, pr->a.buf, 64, LK(&pr->a), RADDR(&pr->b, 8192),
				       RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	/* the WRITE waits behind the SEND that waits for a receive */
	vt_expect_none(pr->a.scq, 20);
	assert_int_equal(pr->b.buf[8192], 0);
	assert_int_equal(pr->b.buf[8192 + 63], 0);
	assert_int_equal(vt_post_recv(pr->b.qp, 3, pr->b.buf, 64, LK(&pr->b)), 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(pr->b.buf[8192 + 63], 0x66);
	vt_expect_wc(pr->b.rcq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
}

static void test_uc_no_recv_drops(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_UC);
	struct ql_device_counters c0, c1;
	struct ibv_wc wc;

	vt_counters(pr->b.dev, &c0);
	memcpy(pr->a.buf, "first", 6);
	assert_int_equal(vt_post_send(pr->a.qp, 1, pr->a.buf, 6, LK(&pr->a), IBV_SEND_SIGNALED), 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_int_equal(vt_post_write_imm(pr->a.qp, 2, pr->a.buf, 6, LK(&pr->a), RADDR(&pr->b, 0),
					   RK(&pr->b), htonl(9), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_counters(pr->b.dev, &c1);
	CNT_EQ(pr, c1.uc_drop_no_recv, c0.uc_drop_no_recv + 2);
	assert_state(pr->b.qp, IBV_QPS_RTS);

	/* the next SEND finds the receive: the dropped one is gone */
	assert_int_equal(vt_post_recv(pr->b.qp, 3, pr->b.buf + 4096, 64, LK(&pr->b)), 0);
	vt_expect_none(pr->b.rcq, 5);
	memcpy(pr->a.buf + 100, "second", 7);
	assert_int_equal(
		vt_post_send(pr->a.qp, 4, pr->a.buf + 100, 7, LK(&pr->a), IBV_SEND_SIGNALED), 0);
	vt_expect_wc(pr->a.scq, &wc, 4, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->b.rcq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 7);
	assert_string_equal((char *)pr->b.buf + 4096, "second");
}

/* ---- receive errors ------------------------------------------------- */

static void recv_too_small(void **state, enum ibv_qp_type t)
{
	struct vt_pair *pr = pair_simple(state, t);
	struct ql_device_counters c0, c1;
	struct ibv_wc wc;

	vt_counters(pr->b.dev, &c0);
	assert_int_equal(vt_post_recv(pr->b.qp, 1, pr->b.buf, 16, LK(&pr->b)), 0);
	assert_int_equal(vt_post_recv(pr->b.qp, 2, pr->b.buf + 1024, 1024, LK(&pr->b)), 0);
	assert_int_equal(vt_post_send(pr->a.qp, 3, pr->a.buf, 100, LK(&pr->a), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc_alt(pr->param, pr->b.rcq, &wc, 1, IBV_WC_LOC_LEN_ERR, IBV_WC_LOC_QP_OP_ERR,
			 RXE_RECV_LEN);
	assert_int_equal(wc.qp_num, ql_qp_num(pr->b.qp));
	/* the receiver's QP is in ERR: the next receive is flushed */
	vt_expect_wc(pr->b.rcq, &wc, 2, IBV_WC_WR_FLUSH_ERR, -1);
	assert_state(pr->b.qp, IBV_QPS_ERR);
	if (t == IBV_QPT_RC) {
		vt_expect_wc_alt(pr->param, pr->a.scq, &wc, 3, IBV_WC_REM_INV_REQ_ERR,
				 IBV_WC_REM_OP_ERR, RXE_RECV_LEN);
		assert_state(pr->a.qp, IBV_QPS_ERR);
		vt_counters(pr->b.dev, &c1);
		CNT_EQ(pr, c1.rc_nak_inv_req, c0.rc_nak_inv_req + 1);
	}
}

static void test_recv_too_small_rc(void **state)
{
	recv_too_small(state, IBV_QPT_RC);
}

static void test_recv_too_small_uc(void **state)
{
	recv_too_small(state, IBV_QPT_UC);
}

static void test_recv_bad_lkey(void **state)
{
	struct vt_pair *pr = pair_simple(state, IBV_QPT_RC);
	struct ql_device_counters c0, c1;
	struct ibv_wc wc;

	vt_counters(pr->b.dev, &c0);
	assert_int_equal(vt_post_recv(pr->b.qp, 1, pr->b.buf, 256, BADKEY(LK(&pr->b))), 0);
	memset(pr->a.buf, 0x71, 64);
	assert_int_equal(vt_post_send(pr->a.qp, 2, pr->a.buf, 64, LK(&pr->a), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc_alt(pr->param, pr->b.rcq, &wc, 1, IBV_WC_LOC_PROT_ERR, IBV_WC_LOC_QP_OP_ERR,
			 RXE_RECV_KEY);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_REM_OP_ERR, -1);
	assert_state(pr->a.qp, IBV_QPS_ERR);
	assert_state(pr->b.qp, IBV_QPS_ERR);
	assert_int_equal(pr->b.buf[0], 0);
	vt_counters(pr->b.dev, &c1);
	CNT_EQ(pr, c1.rc_nak_op_err, c0.rc_nak_op_err + 1);
}

/* ---- peer not ready ------------------------------------------------- */

static void test_peer_not_ready_rc(void **state)
{
	const struct vt_param *p = *state;
	struct vt_opts o = { .type = IBV_QPT_RC, .no_connect = true };
	struct ql_qp_connect_opts co;
	struct vt_pair *pr;
	struct ibv_wc wc;
	uint64_t t0;

	assert_int_equal(vt_pair_create(p, &o, &cur), 0);
	pr = cur;
	ql_qp_connect_opts_default(&co);
	co.timeout = 1; /* 8.192 us */
	co.retry_cnt = 2;
	assert_int_equal(vt_end_connect(&pr->a, &pr->b, &co), 0);
	assert_int_equal(vt_modify_init(pr->b.qp, VT_ACCESS_ALL), 0);

	memset(pr->a.buf, 0x12, 64);
	t0 = vt_now_ns();
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 64, LK(&pr->a), RADDR(&pr->b, 0),
				       RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_RETRY_EXC_ERR, -1);
	/* 3 tries at 8 us each: well under a second */
	assert_true(vt_now_ns() - t0 < 1000000000ull);
	assert_state(pr->a.qp, IBV_QPS_ERR);
	assert_state(pr->b.qp, IBV_QPS_INIT);
	assert_int_equal(pr->b.buf[0], 0);
}

static void test_peer_not_ready_uc(void **state)
{
	const struct vt_param *p = *state;
	struct vt_opts o = { .type = IBV_QPT_UC, .no_connect = true };
	struct ql_device_counters c0, c1;
	struct vt_pair *pr;
	struct ibv_wc wc;

	assert_int_equal(vt_pair_create(p, &o, &cur), 0);
	pr = cur;
	assert_int_equal(vt_end_connect(&pr->a, &pr->b, NULL), 0);
	assert_int_equal(vt_modify_init(pr->b.qp, VT_ACCESS_ALL), 0);
	vt_counters(pr->b.dev, &c0);
	memset(pr->a.buf, 0x13, 64);
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 64, LK(&pr->a), RADDR(&pr->b, 0),
				       RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_counters(pr->b.dev, &c1);
	CNT_EQ(pr, c1.uc_drop_not_ready, c0.uc_drop_not_ready + 1);
	assert_int_equal(pr->b.buf[0], 0);
	assert_state(pr->a.qp, IBV_QPS_RTS);
}

/* ---- flushing ------------------------------------------------------- */

static void err_flushes(void **state, enum ibv_qp_type t)
{
	struct vt_pair *pr = pair_simple(state, t);
	struct ibv_wc wc;

	for (int i = 0; i < 5; i++)
		assert_int_equal(
			vt_post_recv(pr->b.qp, 10 + i, pr->b.buf + i * 256, 256, LK(&pr->b)), 0);
	/* outstanding sends: held back by SQD */
	assert_int_equal(vt_modify_state(pr->a.qp, IBV_QPS_SQD), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(vt_post_send(pr->a.qp, 20 + i, pr->a.buf, 16, LK(&pr->a),
					      i == 1 ? 0 : IBV_SEND_SIGNALED),
				 0);
	assert_int_equal(vt_modify_state(pr->a.qp, IBV_QPS_ERR), 0);
	for (int i = 0; i < 3; i++) {
		vt_expect_wc(pr->a.scq, &wc, 20 + i, IBV_WC_WR_FLUSH_ERR, -1);
		assert_int_equal(wc.qp_num, ql_qp_num(pr->a.qp));
	}
	vt_expect_none(pr->a.scq, 5);

	assert_int_equal(vt_modify_state(pr->b.qp, IBV_QPS_ERR), 0);
	for (int i = 0; i < 5; i++) {
		vt_expect_wc(pr->b.rcq, &wc, 10 + i, IBV_WC_WR_FLUSH_ERR, -1);
		assert_int_equal(wc.qp_num, ql_qp_num(pr->b.qp));
	}
	vt_expect_none(pr->b.rcq, 5);
}

static void test_err_flushes_rc(void **state)
{
	err_flushes(state, IBV_QPT_RC);
}

static void test_err_flushes_uc(void **state)
{
	err_flushes(state, IBV_QPT_UC);
}

/* ---- CQ overrun ----------------------------------------------------- */

/* soft+udp's receive counter of a's device (0 for the other kinds). */
static uint64_t rx_packets(struct vt_pair *pr)
{
	struct ql_device_counters c;

	if (!pr->param->udp || ql_device_counters(pr->a.dev, &c))
		return 0;
	return c.rx_packets;
}

/* soft+udp: wait (at most 2 s) until a's device has received n packets
 * since `base`: the acknowledgements of n WRITEs (and the WRITEs too when
 * both ends share the device). The other kinds complete inside the post. */
static void wait_rx_packets(struct vt_pair *pr, uint64_t base, uint64_t n)
{
	uint64_t until = vt_now_ns() + 2000000000ull;

	if (!pr->param->udp)
		return;
	if (pr->a.dev == pr->b.dev)
		n *= 2;
	while (rx_packets(pr) - base < n && vt_now_ns() < until)
		vt_progress_all(); /* caller progress: the NICs run here */
}

static void test_cq_overrun(void **state)
{
	struct vt_pair *pr;
	struct ibv_wc wc;
	int ok = 0, ret = 0;
	uint64_t base, deadline = vt_now_ns() + VT_TIMEOUT_MS * 1000000ull;

	VT_SOFT_ONLY((const struct vt_param *)*state,
		     "CQ overrun reported by ql_cq_poll as -EOVERFLOW (a real device raises an "
		     "asynchronous IBV_EVENT_CQ_ERR, and may lose completions)");
	pr = pair_with(state, IBV_QPT_RC, 4, VT_ACCESS_ALL, 7, 14, 7, 12);
	base = rx_packets(pr);

	for (int i = 0; i < 5; i++)
		assert_int_equal(vt_post_write(pr->a.qp, i, pr->a.buf, 8, LK(&pr->a),
					       RADDR(&pr->b, 0), RK(&pr->b), IBV_SEND_SIGNALED),
				 0);
	/* soft+udp completes on its NIC thread (or, in caller progress mode,
	 * in wait_rx_packets' progress calls): let the five acknowledgements
	 * arrive before the first poll, or a prompt poller drains the CQ before
	 * it can overrun (soft loop and shm complete inside the post) */
	wait_rx_packets(pr, base, 5);
	while (vt_now_ns() < deadline) {
		ret = ql_cq_poll(pr->a.scq, 1, &wc);
		if (ret < 0)
			break;
		if (ret == 1) {
			assert_int_equal(wc.status, IBV_WC_SUCCESS);
			assert_int_equal(wc.wr_id, ok);
			ok++;
		}
	}
	assert_int_equal(ok, 4);
	assert_int_equal(ret, -EOVERFLOW);
	assert_int_equal(ql_cq_poll(pr->a.scq, 1, &wc), -EOVERFLOW);
	assert_int_equal(ql_cq_poll(pr->a.scq, 4, &wc), -EOVERFLOW);
	assert_state(pr->a.qp, IBV_QPS_ERR);
}

static void test_cq_recv_not_counted(void **state)
{
	struct vt_pair *pr;
	struct ibv_wc wc;

	VT_SOFT_ONLY((const struct vt_param *)*state,
		     "receive completions held in the receive queue, never overrunning a CQ (a "
		     "real device puts them in the CQ, which must be sized for them)");
	pr = pair_with(state, IBV_QPT_RC, 2, VT_ACCESS_ALL, 7, 14, 7, 12);

	for (int i = 0; i < 6; i++)
		assert_int_equal(vt_post_recv(pr->b.qp, 30 + i, pr->b.buf + i * 64, 64, LK(&pr->b)),
				 0);
	for (int i = 0; i < 6; i++) {
		pr->a.buf[i] = (uint8_t)(0x80 + i);
		assert_int_equal(vt_post_send(pr->a.qp, i, pr->a.buf + i, 1, LK(&pr->a),
					      i == 5 ? IBV_SEND_SIGNALED : 0),
				 0);
	}
	vt_expect_wc(pr->a.scq, &wc, 5, IBV_WC_SUCCESS, IBV_WC_SEND);
	/* six receive completions in a CQ of two: none lost, no overrun */
	for (int i = 0; i < 6; i++) {
		vt_expect_wc(pr->b.rcq, &wc, 30 + i, IBV_WC_SUCCESS, IBV_WC_RECV);
		assert_int_equal(pr->b.buf[i * 64], 0x80 + i);
	}
	assert_int_equal(ql_cq_poll(pr->b.rcq, 1, &wc), 0);
	assert_state(pr->b.qp, IBV_QPS_RTS);
}

#define T(f) cmocka_unit_test_teardown(f, td_cur)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_loc_bad_lkey_rc),
		T(test_loc_bad_lkey_uc),
		T(test_loc_outside_mr),
		T(test_mr_reg_soft_limits),
		T(test_qp_create_soft_limits),
		T(test_loc_read_into_readonly_mr),
		T(test_loc_atomic_into_readonly_mr),
		T(test_rc_bad_rkey),
		T(test_rc_out_of_bounds),
		T(test_rc_mr_rights),
		T(test_rc_qp_access_flags),
		T(test_rc_qp_access_no_read),
		T(test_uc_access_drops),
		T(test_uc_qp_access_drop),
		T(test_uc_write_imm_bad_rkey_keeps_recv),
		T(test_zero_length_write_ignores_rkey),
		T(test_atomic_misaligned),
		T(test_atomic_local_len),
		T(test_post_invalid),
		T(test_post_invalid_uc),
		T(test_rnr_exceeded_send),
		T(test_rnr_exceeded_write_imm),
		T(test_rnr_then_recv),
		T(test_rnr_stall_keeps_order),
		T(test_uc_no_recv_drops),
		T(test_recv_too_small_rc),
		T(test_recv_too_small_uc),
		T(test_recv_bad_lkey),
		T(test_peer_not_ready_rc),
		T(test_peer_not_ready_uc),
		T(test_err_flushes_rc),
		T(test_err_flushes_uc),
		T(test_cq_overrun),
		T(test_cq_recv_not_counted),
	};

	return VT_RUN_PER_URI(tests) ? 1 : 0;
}
