/* SPDX-License-Identifier: MIT */
/*
 * verbs_fixture: shared setup for the verbs tests (see verbs_fixture.h).
 */
#include "verbs_fixture.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const struct vt_param vt_params[VT_NPARAMS] = {
	{ .name = "loop", .uri = "soft://loop", .wire = "loop", .shm = false },
	{ .name = "shm", .uri = "soft+shm://qltest", .wire = "shm", .shm = true },
	{ .name = "udp", .uri = "soft+udp://127.0.0.1", .wire = "udp", .udp = true },
};

int vt_group_loop(void **state)
{
	*state = (void *)&vt_params[0];
	return 0;
}

int vt_group_shm(void **state)
{
	*state = (void *)&vt_params[1];
	return 0;
}

int vt_group_udp(void **state)
{
	*state = (void *)&vt_params[2];
	return 0;
}

static struct vt_param ibv_param = { .name = "ibv", .ibv = true };
static char ibv_group_name[2 * QL_DEVICE_URI_MAX + 16];

const struct vt_param *vt_ibv_param(void)
{
	const char *a = getenv("QLINK_TEST_IBV_A");
	const char *b = getenv("QLINK_TEST_IBV_B");

	if (!a || !*a)
		return NULL;
	ibv_param.uri = a;
	ibv_param.uri_b = b && *b ? b : a;
	return &ibv_param;
}

bool vt_soft_enabled(void)
{
	const char *s = getenv("QLINK_TEST_SOFT");

	return !s || strcmp(s, "0") != 0;
}

bool vt_udp_enabled(void)
{
	const char *s = getenv("QLINK_TEST_UDP");

	return vt_soft_enabled() && (!s || strcmp(s, "0") != 0);
}

int vt_group_ibv(void **state)
{
	const struct vt_param *p = vt_ibv_param();

	if (!p)
		return -1;
	*state = (void *)p;
	return 0;
}

int vt_run_per_uri(const struct CMUnitTest *tests, size_t n)
{
	const struct vt_param *ibv = vt_ibv_param();
	int failed = 0;

	if (vt_soft_enabled()) {
		failed += _cmocka_run_group_tests("soft://loop", tests, n, vt_group_loop, NULL);
		failed +=
			_cmocka_run_group_tests("soft+shm://qltest", tests, n, vt_group_shm, NULL);
		if (vt_udp_enabled())
			failed += _cmocka_run_group_tests("soft+udp://127.x.y.z", tests, n,
							  vt_group_udp, NULL);
	} else {
		print_message("QLINK_TEST_SOFT=0: soft://loop and soft+shm:// groups left out\n");
	}
	if (ibv) {
		snprintf(ibv_group_name, sizeof(ibv_group_name), "%s <-> %s", ibv->uri, ibv->uri_b);
		failed += _cmocka_run_group_tests(ibv_group_name, tests, n, vt_group_ibv, NULL);
	}
	return failed;
}

void vt_note(const struct vt_param *p, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	print_message("[     NOTE ] %s: %s\n", p->uri, msg);
}

void vt_dev_uri(const struct vt_param *p, char *buf, size_t len)
{
	static unsigned int seq;

	if (p->udp) {
		unsigned int pid = (unsigned int)getpid();

		snprintf(buf, len, "soft+udp://127.%u.%u.%u:%u", (pid >> 8) & 0xff, pid & 0xff,
			 1 + seq++ % 250, 20000 + (pid >> 16) % 20000);
	} else if (!p->shm)
		snprintf(buf, len, "%s", p->uri);
	else
		snprintf(buf, len, "%s-%d-%u", p->uri, (int)getpid(), seq++);
}

static int dev_open_uri(const char *uri, struct ql_device **dev)
{
	int ret = ql_device_open(uri, dev);

	if (ret)
		print_error("ql_device_open(%s): %s (%s)\n", uri, ql_strerror(ret),
			    ql_error_detail());
	return ret;
}

int vt_dev_open(const struct vt_param *p, struct ql_device **dev)
{
	char uri[QL_DEVICE_URI_MAX];

	vt_dev_uri(p, uri, sizeof(uri));
	return dev_open_uri(uri, dev);
}

int vt_dev_open_b(const struct vt_param *p, struct ql_device **dev)
{
	if (p->ibv)
		return dev_open_uri(p->uri_b, dev);
	return vt_dev_open(p, dev);
}

const char *vt_state_str(enum ibv_qp_state s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return (unsigned int)s < 7 ? n[s] : "?";
}

/* ---- manual transitions --------------------------------------------- */

int vt_attr_init(struct ibv_qp_attr *a, unsigned int access)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_INIT;
	a->pkey_index = 0;
	a->port_num = 1;
	a->qp_access_flags = access;
	return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
}

int vt_attr_rtr(struct ibv_qp_attr *a, enum ibv_qp_type type, const struct ql_conn_params *remote)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = remote->mtu ? remote->mtu : IBV_MTU_4096;
	a->dest_qp_num = remote->qpn;
	a->rq_psn = remote->psn;
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.dgid = remote->gid;
	a->ah_attr.grh.hop_limit = 1;
	a->ah_attr.port_num = 1;
	if (type == IBV_QPT_UC)
		return IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 12;
	return IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
	       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

int vt_attr_rts(struct ibv_qp_attr *a, enum ibv_qp_type type)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->sq_psn = 0;
	if (type == IBV_QPT_UC)
		return IBV_QP_STATE | IBV_QP_SQ_PSN;
	a->timeout = 14;
	a->retry_cnt = 7;
	a->rnr_retry = 7;
	a->max_rd_atomic = 1;
	return IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	       IBV_QP_MAX_QP_RD_ATOMIC;
}

/* ql_qp_modify, saying why when it fails */
static int modify(struct ql_qp *qp, struct ibv_qp_attr *a, int mask, const char *what)
{
	int ret = ql_qp_modify(qp, a, mask);

	if (ret)
		print_message("vt: %s (mask 0x%x): %s (%s)\n", what, mask, ql_strerror(ret),
			      ql_error_detail());
	return ret;
}

int vt_modify_init(struct ql_qp *qp, unsigned int access)
{
	struct ibv_qp_attr a;
	int mask = vt_attr_init(&a, access);

	return modify(qp, &a, mask, "-> INIT");
}

int vt_modify_rtr(struct ql_qp *qp, enum ibv_qp_type type, const struct ql_conn_params *remote)
{
	struct ibv_qp_attr a;
	int mask = vt_attr_rtr(&a, type, remote);

	return modify(qp, &a, mask, "-> RTR");
}

int vt_modify_rts(struct ql_qp *qp, enum ibv_qp_type type)
{
	struct ql_conn_params lp;
	struct ibv_qp_attr a;
	int mask = vt_attr_rts(&a, type);

	/* send from the PSN the peer was told (vt_end's params: random on
	 * soft+udp) */
	if (ql_qp_local_params(qp, &lp) == 0)
		a.sq_psn = lp.psn;

	return modify(qp, &a, mask, "-> RTS");
}

int vt_modify_state(struct ql_qp *qp, enum ibv_qp_state s)
{
	static const char *const names[] = { "-> RESET", "-> INIT", "-> RTR", "-> RTS",
					     "-> SQD",	 "-> SQE",  "-> ERR" };
	struct ibv_qp_attr a;

	struct ql_qp_init_attr init;
	struct timespec t0, t;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = s;
	ret = modify(qp, &a, IBV_QP_STATE, (unsigned int)s < 7 ? names[s] : "-> ?");
	if (ret || s != IBV_QPS_SQD)
		return ret;
	/* The drain into SQD completes later (IBV_EVENT_SQ_DRAINED); until
	 * then Linux (rxe_qp_chk_attr) refuses every transition but to ERR.
	 * Wait for it as an application waits for the event, so a test's next
	 * transition does not race the kernel's requester task. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		vt_progress_all();
		if (ql_qp_query(qp, &a, IBV_QP_STATE, &init))
			return 0; /* not queryable: nothing to wait for */
		if (a.qp_state != IBV_QPS_SQD || !a.sq_draining)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 5) {
			fprintf(stderr, "vt: -> SQD: still draining after 5 s\n");
			return -ETIMEDOUT;
		}
		usleep(1000);
	}
}

/* ---- caller progress -------------------------------------------------- */

/* The devices of the ends and nodes this process has open. A test plays
 * both ends in one thread: with soft+udp in caller progress mode
 * (docs/progress.md) nothing moves on a device nobody polls, so every wait
 * of the fixture progresses them all, as the peer's own polling would. */
#define VT_MAX_PROGRESS 64
static struct ql_device *progress_devs[VT_MAX_PROGRESS];

static void progress_add(struct ql_device *dev)
{
	for (int i = 0; i < VT_MAX_PROGRESS; i++)
		if (!progress_devs[i]) {
			progress_devs[i] = dev;
			return;
		}
}

static void progress_del(struct ql_device *dev)
{
	for (int i = 0; i < VT_MAX_PROGRESS; i++)
		if (progress_devs[i] == dev)
			progress_devs[i] = NULL;
}

void vt_progress_all(void)
{
	for (int i = 0; i < VT_MAX_PROGRESS; i++)
		if (progress_devs[i])
			(void)ql_device_progress(progress_devs[i]);
}

/* ---- pairs ---------------------------------------------------------- */

static void end_destroy(struct vt_end *e)
{
	int ret;

	if (e->qp && (ret = ql_qp_destroy(e->qp)))
		print_error("ql_qp_destroy: %s\n", ql_strerror(ret));
	if (e->mr && (ret = ql_mr_dereg(e->mr)))
		print_error("ql_mr_dereg: %s\n", ql_strerror(ret));
	if (e->scq && (ret = ql_cq_destroy(e->scq)))
		print_error("ql_cq_destroy: %s\n", ql_strerror(ret));
	if (e->rcq && e->rcq != e->scq && (ret = ql_cq_destroy(e->rcq)))
		print_error("ql_cq_destroy: %s\n", ql_strerror(ret));
	if (e->pd && (ret = ql_pd_free(e->pd)))
		print_error("ql_pd_free: %s\n", ql_strerror(ret));
	if (e->dev)
		progress_del(e->dev);
	if (e->dev && (ret = ql_device_close(e->dev)))
		print_error("ql_device_close: %s\n", ql_strerror(ret));
	if (e->buf)
		ql_mem_free(e->buf);
	memset(e, 0, sizeof(*e));
}

static int end_create(const struct vt_param *p, const struct vt_opts *o, struct vt_end *e,
		      bool b_end)
{
	int cqe = o->cqe ? o->cqe : 256;
	int ret;

	if (b_end && p->udp && o->query_b) {
		char uri[QL_DEVICE_URI_MAX];
		size_t l;

		vt_dev_uri(p, uri, sizeof(uri));
		l = strlen(uri);
		if (snprintf(uri + l, sizeof(uri) - l, "?%s", o->query_b) >= (int)(sizeof(uri) - l))
			return -ENAMETOOLONG;
		ret = dev_open_uri(uri, &e->dev);
	} else {
		ret = b_end ? vt_dev_open_b(p, &e->dev) : vt_dev_open(p, &e->dev);
	}
	if (ret)
		return ret;
	progress_add(e->dev);
	ret = ql_device_query(e->dev, &e->attr);
	if (ret)
		return ret;
	ret = ql_pd_alloc(e->dev, &e->pd);
	if (ret)
		return ret;
	ret = ql_cq_create(e->dev, cqe, &e->scq);
	if (ret)
		return ret;
	ret = ql_cq_create(e->dev, cqe, &e->rcq);
	if (ret)
		return ret;
	e->len = VT_BUF_LEN;
	e->buf = ql_mem_alloc(e->len);
	if (!e->buf)
		return -ENOMEM;
	ret = ql_mr_reg(e->pd, e->buf, e->len, VT_ACCESS_ALL, &e->mr);
	if (ret)
		return ret;

	memset(&e->init, 0, sizeof(e->init));
	e->init.send_cq = e->scq;
	e->init.recv_cq = e->rcq;
	e->init.qp_type = o->type ? o->type : IBV_QPT_RC;
	e->init.sq_sig_all = o->sq_sig_all;
	e->init.cap.max_send_wr = o->max_send_wr ? o->max_send_wr : 64;
	e->init.cap.max_recv_wr = o->max_recv_wr ? o->max_recv_wr : 64;
	e->init.cap.max_send_sge = o->max_sge ? o->max_sge : 4;
	e->init.cap.max_recv_sge = o->max_sge ? o->max_sge : 4;
	e->init.cap.max_inline_data = o->max_inline ? o->max_inline : 64;
	ret = ql_qp_create(e->pd, &e->init, &e->qp);
	if (ret)
		return ret;
	ret = ql_qp_local_params(e->qp, &e->params);
	if (ret)
		return ret;
	e->params.vaddr = (uintptr_t)e->buf;
	e->params.rkey = ql_mr_rkey(e->mr);
	e->params.length = e->len;
	return 0;
}

int vt_end_connect(struct vt_end *x, const struct vt_end *y, const struct ql_qp_connect_opts *o)
{
	int ret = ql_qp_connect(x->qp, &y->params, o);

	if (ret)
		print_error("ql_qp_connect: %s (%s)\n", ql_strerror(ret), ql_error_detail());
	return ret;
}

/* The soft+udp UC pair of the running test (see vt_poll_one). */
static struct vt_pair *udp_uc_pair;

int vt_pair_create(const struct vt_param *p, const struct vt_opts *opts, struct vt_pair **out)
{
	struct vt_pair *pr = calloc(1, sizeof(*pr));
	int ret;

	if (!pr)
		return -ENOMEM;
	pr->param = p;
	pr->opts = *opts;
	if (!pr->opts.type)
		pr->opts.type = IBV_QPT_RC;
	ret = end_create(p, &pr->opts, &pr->a, false);
	if (!ret)
		ret = end_create(p, &pr->opts, &pr->b, true);
	if (!ret && !pr->opts.no_connect) {
		ret = vt_end_connect(&pr->a, &pr->b, pr->opts.have_conn ? &pr->opts.conn_a : NULL);
		if (!ret)
			ret = vt_end_connect(&pr->b, &pr->a,
					     pr->opts.have_conn ? &pr->opts.conn_b : NULL);
	}
	if (ret) {
		print_error("vt_pair_create(%s): %s (%s)\n", p->name, ql_strerror(ret),
			    ql_error_detail());
		vt_pair_destroy(pr);
		return ret;
	}
	if (p->udp && pr->opts.type == IBV_QPT_UC)
		udp_uc_pair = pr;
	*out = pr;
	return 0;
}

void vt_pair_destroy(struct vt_pair *pr)
{
	if (!pr)
		return;
	if (udp_uc_pair == pr)
		udp_uc_pair = NULL;
	end_destroy(&pr->a);
	end_destroy(&pr->b);
	free(pr);
}

static int setup_with(void **state, enum ibv_qp_type type, bool no_connect)
{
	const struct vt_param *p = *state;
	struct vt_opts o = { .type = type, .no_connect = no_connect };
	struct vt_pair *pr;

	if (vt_pair_create(p, &o, &pr))
		return -1;
	*state = pr;
	return 0;
}

int vt_setup_rc(void **state)
{
	return setup_with(state, IBV_QPT_RC, false);
}

int vt_setup_uc(void **state)
{
	return setup_with(state, IBV_QPT_UC, false);
}

int vt_setup_rc_reset(void **state)
{
	return setup_with(state, IBV_QPT_RC, true);
}

int vt_setup_uc_reset(void **state)
{
	return setup_with(state, IBV_QPT_UC, true);
}

int vt_teardown(void **state)
{
	vt_pair_destroy(*state);
	return 0;
}

/* ---- posting -------------------------------------------------------- */

static int post1(struct ql_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int ret = ql_qp_post_send(qp, wr, &bad);

	if (ret && bad != wr)
		return -EFAULT; /* bad_wr must name the WR that was refused */
	return ret;
}

int vt_post_write(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey,
		  uint64_t raddr, uint32_t rkey, unsigned int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = flags,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	};

	return post1(qp, &wr);
}

int vt_post_write_imm(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey,
		      uint64_t raddr, uint32_t rkey, uint32_t imm_be, unsigned int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = flags,
		.imm_data = imm_be,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	};

	return post1(qp, &wr);
}

int vt_post_read(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey,
		 uint64_t raddr, uint32_t rkey, unsigned int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_READ,
		.send_flags = flags,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	};

	return post1(qp, &wr);
}

int vt_post_send(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey,
		 unsigned int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
		.opcode = IBV_WR_SEND,
		.send_flags = flags,
	};

	return post1(qp, &wr);
}

int vt_post_send_imm(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey,
		     uint32_t imm_be, unsigned int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
		.opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = flags,
		.imm_data = imm_be,
	};

	return post1(qp, &wr);
}

int vt_post_atomic(struct ql_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *laddr,
		   uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t cmp_add, uint64_t swap,
		   unsigned int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = 8, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = flags,
		.wr.atomic = { .remote_addr = raddr,
			       .compare_add = cmp_add,
			       .swap = swap,
			       .rkey = rkey },
	};

	return post1(qp, &wr);
}

int vt_post_recv(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad = NULL;
	int ret = ql_qp_post_recv(qp, &wr, &bad);

	if (ret && bad != &wr)
		return -EFAULT;
	return ret;
}

/* ---- completions ---------------------------------------------------- */

int vt_node_open(struct vt_node *n, struct ql_device *dev, size_t len)
{
	int ret;

	memset(n, 0, sizeof(*n));
	n->dev = dev;
	progress_add(dev);
	ret = ql_pd_alloc(n->dev, &n->pd);
	if (ret)
		return ret;
	n->len = len;
	n->buf = ql_mem_alloc(len);
	if (!n->buf)
		return -ENOMEM;
	return ql_mr_reg(n->pd, n->buf, len, VT_ACCESS_ALL, &n->mr);
}

void vt_node_close(struct vt_node *n)
{
	if (n->mr)
		ql_mr_dereg(n->mr);
	if (n->pd)
		ql_pd_free(n->pd);
	if (n->dev) {
		progress_del(n->dev);
		ql_device_close(n->dev);
	}
	if (n->buf)
		ql_mem_free(n->buf);
	memset(n, 0, sizeof(*n));
}

int vt_node_qp_create(struct vt_node *n, struct vt_node_qp *q, int cqe, uint32_t max_wr,
		      uint32_t max_inline)
{
	struct ql_qp_init_attr ia;
	int ret;

	memset(q, 0, sizeof(*q));
	ret = ql_cq_create(n->dev, cqe, &q->scq);
	if (ret)
		return ret;
	ret = ql_cq_create(n->dev, cqe, &q->rcq);
	if (ret)
		return ret;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = q->scq;
	ia.recv_cq = q->rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = max_wr;
	ia.cap.max_recv_wr = max_wr;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
	ia.cap.max_inline_data = max_inline;
	ret = ql_qp_create(n->pd, &ia, &q->qp);
	if (ret)
		return ret;
	ret = ql_qp_local_params(q->qp, &q->local);
	if (ret)
		return ret;
	q->local.vaddr = (uintptr_t)n->buf;
	q->local.rkey = ql_mr_rkey(n->mr);
	q->local.length = n->len;
	return 0;
}

void vt_node_qp_destroy(struct vt_node_qp *q)
{
	if (q->qp)
		ql_qp_destroy(q->qp);
	if (q->scq)
		ql_cq_destroy(q->scq);
	if (q->rcq)
		ql_cq_destroy(q->rcq);
	memset(q, 0, sizeof(*q));
}

uint64_t vt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int vt_poll_one(struct ql_cq *cq, struct ibv_wc *wc, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	unsigned int spins = 0;

	for (;;) {
		int n = ql_cq_poll(cq, 1, wc);

		if (n == 1 && udp_uc_pair && wc->status == IBV_WC_SUCCESS &&
		    (wc->opcode == IBV_WC_SEND || wc->opcode == IBV_WC_RDMA_WRITE) &&
		    (wc->qp_num == ql_qp_num(udp_uc_pair->a.qp) ||
		     wc->qp_num == ql_qp_num(udp_uc_pair->b.qp)))
			/* UC over soft+udp completes once on the wire: let
			 * the responder act before the test looks */
			vt_settle(udp_uc_pair);
		if (n != 0)
			return n;
		vt_progress_all();
		if ((++spins & 63) == 0) {
			if (vt_now_ns() > deadline)
				return 0;
			/* two vCPUs: let a peer process run */
			if ((spins & 4095) == 0)
				sched_yield();
		}
	}
}

int vt_poll_for(struct ql_cq *cq, struct ibv_wc *wc, int max, int ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)ms * 1000000ull;
	int got = 0;

	while (vt_now_ns() < deadline) {
		struct ibv_wc tmp;
		int n = ql_cq_poll(cq, 1, &tmp);

		if (n < 0)
			return n;
		if (n > 0) {
			if (got < max)
				wc[got] = tmp;
			got++;
		}
		vt_progress_all();
	}
	return got;
}

void vt_udp_settle(struct ql_device *dev)
{
	struct ql_device_counters c0, c1;
	uint64_t deadline = vt_now_ns() + 2000000000ull;

	/* soft+udp completes a UC send once it is on the wire: what the
	 * receiver did with it shows a moment later. Quiet for 10 ms (no
	 * datagram sent or processed) counts as done. */
	if (ql_device_counters(dev, &c0))
		return;
	while (vt_now_ns() < deadline) {
		struct timespec ts = { 0, 100000 };

		for (int k = 0; k < 100; k++) {
			vt_progress_all();
			nanosleep(&ts, NULL);
		}
		if (ql_device_counters(dev, &c1))
			return;
		if (c1.rx_packets == c0.rx_packets && c1.tx_packets == c0.tx_packets)
			return;
		c0 = c1;
	}
}

void vt_settle(const struct vt_pair *pr)
{
	struct ql_device_counters a, b;
	uint64_t deadline = vt_now_ns() + 5000000000ull;

	if (!pr->param->udp)
		return;
	/* Every datagram one end sent has been processed by the other (the
	 * pair's devices talk only to each other; rx_packets counts a
	 * datagram once the NIC is done with it, whatever the verdict). */
	while (vt_now_ns() < deadline) {
		if (ql_device_counters(pr->a.dev, &a) || ql_device_counters(pr->b.dev, &b))
			return;
		if (b.rx_packets >= a.tx_packets && a.rx_packets >= b.tx_packets)
			return;
		vt_progress_all();
		sched_yield();
	}
}

void vt_counters(struct ql_device *dev, struct ql_device_counters *c)
{
	struct ql_device_attr a;

	memset(c, 0, sizeof(*c));
	assert_int_equal(ql_device_query(dev, &a), 0);
	if (!strcmp(a.wire, "udp")) {
		if (udp_uc_pair && (udp_uc_pair->a.dev == dev || udp_uc_pair->b.dev == dev))
			vt_settle(udp_uc_pair);
		else
			vt_udp_settle(dev);
	}
	if (strcmp(a.provider, "soft") != 0) {
		assert_int_equal(ql_device_counters(dev, c), -EOPNOTSUPP);
		memset(c, 0, sizeof(*c));
		return;
	}
	assert_int_equal(ql_device_counters(dev, c), 0);
}

bool vt_has_counters(const struct vt_param *p)
{
	return !p->ibv;
}

void vt_fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

bool vt_check(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *p = buf;
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		if (p[i] != (uint8_t)(x >> 16))
			return false;
	}
	return true;
}
