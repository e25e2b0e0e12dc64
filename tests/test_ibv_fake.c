/* SPDX-License-Identifier: MIT */
/*
 * The ibv provider against a stand-in libibverbs, on a machine with no RDMA
 * device: this program defines the libibverbs entry points the provider
 * calls (the linker binds the provider to them instead of the library's),
 * and a fake device whose behaviour each test sets. What it proves is the
 * provider's own logic, which the Soft-RoCE stage (tests/rxe) cannot make
 * fail on demand: URI parsing and the "found:" list, port and GID choice
 * (first RoCE v2 GID mapping an IPv4 address, as perftest -x), the inline
 * limit found by bisection (exact: one byte more is refused), every
 * libibverbs failure turned into a negative errno with a detail, EBUSY for
 * a device still in use, the address vector's local half filled in from the
 * URI, and the post calls' state check (-EINVAL, *bad_wr at the first WR,
 * nothing handed to the device below RTS).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "expect_detail.h"

#include "qlink/error.h"
#include "qlink/verbs.h"

/* ---- the fake device ------------------------------------------------------ */

struct fake_gid {
	enum ibv_gid_type type;
	uint8_t raw[16];
};

static struct {
	bool list_null; /* ibv_get_device_list fails (no RDMA subsystem) */
	int ndev;
	bool open_fails;
	int nports;
	uint8_t link_layer;
	int ngid;
	struct fake_gid gid[8];
	bool query_gid_fails;
	uint32_t max_inline; /* a QP with more inline data is refused */
	bool query_device_fails;
	int fail_alloc_pd, fail_create_cq, fail_create_qp, fail_reg_mr; /* errno to fail with */
	int fail_dealloc_pd, fail_dereg_mr, fail_destroy_cq, fail_destroy_qp; /* return value */
	int fail_modify_qp, fail_query_qp;
	int poll_ret;
	/* what the provider handed over */
	int live_pd, live_cq, live_qp, live_mr, open_ctx;
	int post_send_calls, post_recv_calls;
	struct ibv_qp_attr last_attr;
	int last_mask;
	unsigned int last_access;
	uint64_t last_iova;
} fk;

static struct ibv_device devs[3];

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	(void)qp;
	fk.post_send_calls++;
	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		*bad = wr;
		return EINVAL; /* libibverbs returns a positive errno */
	}
	return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	(void)wr;
	(void)bad;
	fk.post_recv_calls++;
	return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	(void)cq;
	if (fk.poll_ret > 0 && n > 0) {
		memset(wc, 0, sizeof(*wc));
		wc->wr_id = 77;
		wc->status = IBV_WC_REM_ACCESS_ERR;
		return 1;
	}
	return fk.poll_ret;
}

static void fake_reset(void)
{
	memset(&fk, 0, sizeof(fk));
	fk.ndev = 2;
	fk.nports = 1;
	fk.link_layer = IBV_LINK_LAYER_ETHERNET;
	fk.max_inline = 220;
	fk.ngid = 3;
	fk.gid[0].type = IBV_GID_TYPE_ROCE_V1;
	fk.gid[1].type = IBV_GID_TYPE_ROCE_V2; /* fe80::1, no IPv4 */
	fk.gid[1].raw[0] = 0xfe;
	fk.gid[1].raw[1] = 0x80;
	fk.gid[1].raw[15] = 1;
	fk.gid[2].type = IBV_GID_TYPE_ROCE_V2; /* ::ffff:10.0.0.7 */
	fk.gid[2].raw[10] = 0xff;
	fk.gid[2].raw[11] = 0xff;
	fk.gid[2].raw[12] = 10;
	fk.gid[2].raw[15] = 7;
	for (int i = 0; i < 3; i++) {
		memset(&devs[i], 0, sizeof(devs[i]));
		snprintf(devs[i].name, sizeof(devs[i].name), "fake%d", i);
	}
}

/* ---- the libibverbs entry points the provider calls ------------------------ */

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

struct ibv_device **ibv_get_device_list(int *num);
struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **l;

	if (fk.list_null) {
		errno = ENOSYS;
		return NULL;
	}
	l = calloc((size_t)fk.ndev + 1, sizeof(*l));
	for (int i = 0; l && i < fk.ndev; i++)
		l[i] = &devs[i];
	*num = fk.ndev;
	return l;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *d)
{
	return d->name;
}

struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	struct ibv_context *c;

	if (fk.open_fails) {
		errno = EACCES;
		return NULL;
	}
	c = calloc(1, sizeof(*c)); /* abi_compat NULL: the compat query_port path */
	c->device = d;
	c->ops.post_send = fake_post_send;
	c->ops.post_recv = fake_post_recv;
	c->ops.poll_cq = fake_poll_cq;
	fk.open_ctx++;
	return c;
}

int ibv_close_device(struct ibv_context *c)
{
	free(c);
	fk.open_ctx--;
	return 0;
}

int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *pa);
int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *pa)
{
	/* the caller's buffer is a whole struct ibv_port_attr (verbs.h) */
	struct ibv_port_attr *a = (struct ibv_port_attr *)(void *)pa;

	(void)c;
	if (port < 1 || port > fk.nports)
		return EINVAL;
	a->state = IBV_PORT_ACTIVE;
	a->active_mtu = IBV_MTU_1024;
	a->max_mtu = IBV_MTU_4096;
	a->gid_tbl_len = fk.ngid;
	a->link_layer = fk.link_layer;
	return 0;
}

int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	(void)c;
	(void)port;
	if (fk.query_gid_fails || index < 0 || index >= fk.ngid)
		return -1;
	memcpy(gid->raw, fk.gid[index].raw, 16);
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *e,
		      uint32_t flags, size_t size)
{
	(void)c;
	(void)flags;
	(void)size;
	if (index >= (uint32_t)fk.ngid)
		return EINVAL;
	memset(e, 0, sizeof(*e));
	memcpy(e->gid.raw, fk.gid[index].raw, 16);
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = fk.gid[index].type;
	return 0;
}

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	(void)c;
	if (fk.query_device_fails)
		return EIO;
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "fake-1.0");
	a->max_qp = 64;
	a->phys_port_cnt = (uint8_t)fk.nports;
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct ibv_pd *pd;

	if (fk.fail_alloc_pd) {
		errno = fk.fail_alloc_pd;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	pd->context = c;
	fk.live_pd++;
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	if (fk.fail_dealloc_pd)
		return fk.fail_dealloc_pd;
	free(pd);
	fk.live_pd--;
	return 0;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				unsigned int access)
{
	struct ibv_mr *mr;

	fk.last_iova = iova;
	if (fk.fail_reg_mr) {
		errno = fk.fail_reg_mr;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = len;
	mr->lkey = 0x1000u + (uint32_t)fk.live_mr;
	mr->rkey = 0x2000u + (uint32_t)fk.live_mr;
	fk.last_access = access;
	fk.live_mr++;
	return mr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return ibv_reg_mr_iova2(pd, addr, len, (uintptr_t)addr, (unsigned int)access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	if (fk.fail_dereg_mr) {
		errno = EBUSY;
		return fk.fail_dereg_mr;
	}
	free(mr);
	fk.live_mr--;
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *ctx, struct ibv_comp_channel *ch,
			     int vec)
{
	struct ibv_cq *cq;

	(void)ctx;
	(void)ch;
	(void)vec;
	if (fk.fail_create_cq) {
		errno = fk.fail_create_cq;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	cq->context = c;
	cq->cqe = cqe < 16 ? 16 : cqe; /* devices round up */
	fk.live_cq++;
	return cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	if (fk.fail_destroy_cq)
		return fk.fail_destroy_cq;
	free(cq);
	fk.live_cq--;
	return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	static uint32_t next_qpn = 0x100;
	struct ibv_qp *qp;

	if (fk.fail_create_qp) {
		errno = fk.fail_create_qp;
		return NULL;
	}
	if (ia->cap.max_inline_data > fk.max_inline) {
		errno = EINVAL;
		return NULL;
	}
	/* devices grant in steps: 32-byte units, up to the limit */
	ia->cap.max_inline_data = (ia->cap.max_inline_data + 31) / 32 * 32;
	if (ia->cap.max_inline_data > fk.max_inline)
		ia->cap.max_inline_data = fk.max_inline;
	qp = calloc(1, sizeof(*qp));
	qp->context = pd->context;
	qp->pd = pd;
	qp->qp_context = ia->qp_context;
	qp->send_cq = ia->send_cq;
	qp->recv_cq = ia->recv_cq;
	qp->qp_num = next_qpn++;
	qp->qp_type = ia->qp_type;
	qp->state = IBV_QPS_RESET;
	fk.live_qp++;
	return qp;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	if (fk.fail_destroy_qp) {
		errno = EBUSY;
		return -1; /* the other libibverbs convention: -1 and errno */
	}
	free(qp);
	fk.live_qp--;
	return 0;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	if (fk.fail_modify_qp)
		return fk.fail_modify_qp;
	fk.last_attr = *attr;
	fk.last_mask = mask;
	if (mask & IBV_QP_STATE)
		qp->state = attr->qp_state; /* as libibverbs does */
	return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init)
{
	(void)mask;
	if (fk.fail_query_qp)
		return fk.fail_query_qp;
	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	attr->qp_state = qp->state;
	init->qp_type = qp->qp_type;
	init->cap.max_send_wr = 8;
	init->cap.max_inline_data = 64;
	return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static int setup(void **state)
{
	(void)state;
	fake_reset();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	/* every test gives back what it took */
	assert_int_equal(fk.live_pd, 0);
	assert_int_equal(fk.live_cq, 0);
	assert_int_equal(fk.live_qp, 0);
	assert_int_equal(fk.live_mr, 0);
	assert_int_equal(fk.open_ctx, 0);
	return 0;
}

static struct ql_device *open_ok(const char *uri)
{
	struct ql_device *dev = NULL;
	int ret = ql_device_open(uri, &dev);

	if (ret)
		fail_msg("ql_device_open(%s): %d %s", uri, ret, ql_error_detail());
	assert_non_null(dev);
	return dev;
}

struct objs {
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *cq;
	struct ql_qp *qp;
};

static void objs_create(struct objs *o, const char *uri, enum ibv_qp_type type)
{
	struct ql_qp_init_attr ia = { 0 };

	o->dev = open_ok(uri);
	assert_int_equal(ql_pd_alloc(o->dev, &o->pd), 0);
	assert_int_equal(ql_cq_create(o->dev, 4, &o->cq), 0);
	ia.send_cq = o->cq;
	ia.recv_cq = o->cq;
	ia.qp_type = type;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	assert_int_equal(ql_qp_create(o->pd, &ia, &o->qp), 0);
}

static void objs_destroy(struct objs *o)
{
	assert_int_equal(ql_qp_destroy(o->qp), 0);
	assert_int_equal(ql_cq_destroy(o->cq), 0);
	assert_int_equal(ql_pd_free(o->pd), 0);
	assert_int_equal(ql_device_close(o->dev), 0);
}

/* ---- tests -------------------------------------------------------------------- */

static void test_no_device(void **state)
{
	struct ql_device *dev = NULL;

	(void)state;
	fk.list_null = true;
	assert_int_equal(ql_device_open("ibv://mlx5_0", &dev), -ENODEV);
	assert_null(dev);
	expect_detail("the kernel offers no RDMA devices");

	fk.list_null = false;
	fk.ndev = 0;
	assert_int_equal(ql_device_open("ibv://mlx5_0", &dev), -ENODEV);
	expect_detail("is an RDMA driver such as rdma_rxe loaded?");

	/* the devices there are, named in the error */
	fk.ndev = 2;
	assert_int_equal(ql_device_open("ibv://mlx5_0", &dev), -ENODEV);
	expect_detail("found: fake0, fake1");

	/* a device that cannot be opened reads as absent */
	fk.open_fails = true;
	assert_int_equal(ql_device_open("ibv://fake1", &dev), -ENODEV);
	assert_null(dev);
}

static void test_bad_uri(void **state)
{
	static const char *const bad[] = {
		"ibv://",
		"ibv://:1",
		"ibv://fake0:",
		"ibv://fake0:0",
		"ibv://fake0:256",
		"ibv://fake0:1x",
		"ibv://fake0:1:",
		"ibv://fake0:1:-1",
		"ibv://fake0:1:65536",
		"ibv://fake0:1:2x",
		"ibv://a-device-name-far-longer-than-any-kernel-device-name-could-be-xxxxxxxx",
	};
	struct ql_device *dev;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dev = NULL;
		if (ql_device_open(bad[i], &dev) != -EINVAL)
			fail_msg("%s: not refused with -EINVAL (%s)", bad[i], ql_error_detail());
		assert_null(dev);
	}
	/* no such port */
	assert_int_equal(ql_device_open("ibv://fake0:2", &dev), -EINVAL);
	expect_detail("has no port 2");
	/* no such GID */
	assert_int_equal(ql_device_open("ibv://fake0:1:5", &dev), -EINVAL);
	expect_detail("cannot read GID 5");
}

static void test_gid_choice(void **state)
{
	struct ql_device_attr a;
	struct ql_device *dev;

	(void)state;
	/* the RoCE v2 GID that maps an IPv4 address */
	dev = open_ok("ibv://fake1");
	assert_int_equal(ql_device_query(dev, &a), 0);
	assert_memory_equal(a.gid.raw, fk.gid[2].raw, 16);
	assert_string_equal(a.name, "fake1");
	assert_string_equal(a.uri, "ibv://fake1");
	assert_string_equal(a.provider, "ibv");
	assert_string_equal(a.wire, "roce");
	assert_string_equal(a.dev.fw_ver, "fake-1.0");
	assert_int_equal(ql_device_close(dev), 0);

	/* else the first RoCE v2 GID */
	fk.ngid = 2;
	dev = open_ok("ibv://fake0");
	assert_int_equal(ql_device_query(dev, &a), 0);
	assert_memory_equal(a.gid.raw, fk.gid[1].raw, 16);
	assert_int_equal(ql_device_close(dev), 0);

	/* else index 0; and an InfiniBand port says so */
	fk.ngid = 1;
	fk.link_layer = IBV_LINK_LAYER_INFINIBAND;
	dev = open_ok("ibv://fake0");
	assert_int_equal(ql_device_query(dev, &a), 0);
	assert_memory_equal(a.gid.raw, fk.gid[0].raw, 16);
	assert_string_equal(a.wire, "ib");
	assert_int_equal(ql_device_close(dev), 0);

	/* an explicit index wins */
	fk.ngid = 3;
	dev = open_ok("ibv://fake0:1:1");
	assert_int_equal(ql_device_query(dev, &a), 0);
	assert_memory_equal(a.gid.raw, fk.gid[1].raw, 16);
	/* a failing device query is an error, not garbage */
	fk.query_device_fails = true;
	assert_int_equal(ql_device_query(dev, &a), -EIO);
	fk.query_device_fails = false;
	assert_int_equal(ql_device_close(dev), 0);

	/* the GID cannot be read */
	fk.query_gid_fails = true;
	assert_int_equal(ql_device_open("ibv://fake0", &dev), -EINVAL);
	expect_detail("cannot read GID 2");
}

static void test_inline_probe(void **state)
{
	static const uint32_t limits[] = { 0, 1, 31, 220, 4095, 4096, 100000 };
	struct ql_device_attr a;
	struct ql_device *dev;

	(void)state;
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		fk.max_inline = limits[i];
		dev = open_ok("ibv://fake0");
		assert_int_equal(ql_device_query(dev, &a), 0);
		/* exact up to the 4 KiB probed; the device's own grant above */
		if (limits[i] <= 4096)
			assert_int_equal(a.max_inline_data, limits[i]);
		else
			assert_true(a.max_inline_data >= 4096);
		assert_int_equal(ql_device_close(dev), 0);
	}
	/* no PD or CQ for the probe: no inline data claimed */
	fk.max_inline = 220;
	fk.fail_create_cq = ENOMEM;
	dev = open_ok("ibv://fake0");
	assert_int_equal(ql_device_query(dev, &a), 0);
	assert_int_equal(a.max_inline_data, 0);
	assert_int_equal(ql_device_close(dev), 0);
}

static void test_device_list(void **state)
{
	char uris[8][QL_DEVICE_URI_MAX];
	int n;

	(void)state;
	n = ql_device_list(uris, 8);
	/* soft://loop, soft+shm://NAME, the two fakes, soft+udp://IP[:PORT] */
	assert_int_equal(n, 5);
	assert_string_equal(uris[2], "ibv://fake0");
	assert_string_equal(uris[3], "ibv://fake1");
	assert_string_equal(uris[4], "soft+udp://IP[:PORT]");
	/* a short array: the count of all, only what fits written */
	strcpy(uris[1], "untouched");
	assert_int_equal(ql_device_list(uris, 1), 5);
	assert_string_equal(uris[1], "untouched");
	fk.list_null = true;
	assert_int_equal(ql_device_list(uris, 8), 3);
}

static void test_counters_unsupported(void **state)
{
	struct ql_device_counters c;
	struct ql_device *dev;

	(void)state;
	dev = open_ok("ibv://fake0");
	assert_int_equal(ql_device_counters(dev, &c), -EOPNOTSUPP);
	expect_detail("/sys/class/infiniband/fake0/ports/*/hw_counters");
	assert_int_equal(ql_device_close(dev), 0);
}

static void test_pd_mr_errors(void **state)
{
	static char buf[4096];
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_mr *mr;

	(void)state;
	dev = open_ok("ibv://fake0");
	fk.fail_alloc_pd = EPERM;
	assert_int_equal(ql_pd_alloc(dev, &pd), -EPERM);
	expect_detail("ibv_alloc_pd failed");
	fk.fail_alloc_pd = 0;
	assert_int_equal(ql_pd_alloc(dev, &pd), 0);

	/* a device with a PD cannot be closed */
	assert_int_equal(ql_device_close(dev), -EBUSY);
	expect_detail("still has 1 PDs and 0 CQs");

	/* the provider's own argument checks, before libibverbs */
	assert_int_equal(ql_mr_reg(pd, NULL, 64, IBV_ACCESS_LOCAL_WRITE, &mr), -EINVAL);
	assert_int_equal(ql_mr_reg(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE, &mr), -EINVAL);
	assert_int_equal(ql_mr_reg(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE, &mr), -EINVAL);
	expect_detail("require LOCAL_WRITE");
	assert_int_equal(fk.live_mr, 0);

	/* libibverbs refuses: the errno, and the memlock hint where it helps */
	fk.fail_reg_mr = ENOMEM;
	assert_int_equal(ql_mr_reg(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE, &mr), -ENOMEM);
	expect_detail("check `ulimit -l`");
	fk.fail_reg_mr = EFAULT;
	assert_int_equal(ql_mr_reg(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE, &mr), -EFAULT);
	fk.fail_reg_mr = 0;

	assert_int_equal(ql_mr_reg(pd, buf, sizeof(buf),
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr),
			 0);
	assert_int_equal(fk.last_access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_int_equal(ql_mr_lkey(mr), 0x1000);
	assert_int_equal(ql_mr_rkey(mr), 0x2000);

	/* at an iova: handed to ibv_reg_mr_iova2 as given; its errors reported */
	{
		struct ql_mr *mr0;

		assert_int_equal(ql_mr_reg_iova(pd, buf, sizeof(buf), 0,
						IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
						&mr0),
				 0);
		assert_true(fk.last_iova == 0);
		assert_int_equal(ql_mr_dereg(mr0), 0);
		fk.fail_reg_mr = EINVAL;
		assert_int_equal(ql_mr_reg_iova(pd, buf, sizeof(buf), 4096, IBV_ACCESS_LOCAL_WRITE,
						&mr0),
				 -EINVAL);
		expect_detail("ibv_reg_mr_iova");
		fk.fail_reg_mr = 0;
		assert_int_equal(ql_mr_reg(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE, &mr0), 0);
		assert_true(fk.last_iova == (uintptr_t)buf);
		assert_int_equal(ql_mr_dereg(mr0), 0);
	}

	/* teardown refused by libibverbs (positive errno): reported, kept */
	fk.fail_dereg_mr = EBUSY;
	assert_int_equal(ql_mr_dereg(mr), -EBUSY);
	fk.fail_dereg_mr = 0;
	assert_int_equal(ql_mr_dereg(mr), 0);
	fk.fail_dealloc_pd = EBUSY;
	assert_int_equal(ql_pd_free(pd), -EBUSY);
	expect_detail("MRs or QPs still use it?");
	assert_int_equal(ql_device_close(dev), -EBUSY);
	fk.fail_dealloc_pd = 0;
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), 0);
}

static void test_cq_qp_errors(void **state)
{
	struct ql_device *dev, *other;
	struct ql_cq *cq, *ocq;
	struct ql_qp_init_attr ia = { 0 };
	struct ql_pd *pd;
	struct ql_qp *qp;

	(void)state;
	dev = open_ok("ibv://fake0");
	other = open_ok("ibv://fake1");
	assert_int_equal(ql_cq_create(dev, 0, &cq), -EINVAL);
	fk.fail_create_cq = ENOMEM;
	assert_int_equal(ql_cq_create(dev, 4, &cq), -ENOMEM);
	expect_detail("ibv_create_cq(4)");
	fk.fail_create_cq = 0;
	assert_int_equal(ql_cq_create(dev, 4, &cq), 0);
	assert_int_equal(ql_cq_create(other, 4, &ocq), 0);
	assert_int_equal(ql_pd_alloc(dev, &pd), 0);

	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = 4;
	assert_int_equal(ql_qp_create(pd, &ia, &qp), -EOPNOTSUPP);
	ia.qp_type = IBV_QPT_RC;
	ia.recv_cq = ocq; /* another device's CQ */
	assert_int_equal(ql_qp_create(pd, &ia, &qp), -EINVAL);
	expect_detail("CQs of the QP's device");
	ia.recv_cq = NULL;
	assert_int_equal(ql_qp_create(pd, &ia, &qp), -EINVAL);
	ia.recv_cq = cq;
	fk.fail_create_qp = ENOSPC;
	assert_int_equal(ql_qp_create(pd, &ia, &qp), -ENOSPC);
	expect_detail("ibv_create_qp");
	fk.fail_create_qp = 0;
	assert_int_equal(fk.live_qp, 0);

	ia.cap.max_inline_data = 40;
	ia.qp_context = &ia;
	assert_int_equal(ql_qp_create(pd, &ia, &qp), 0);
	assert_int_equal(ia.cap.max_inline_data, 64); /* what the device granted */
	assert_int_not_equal(ql_qp_num(qp), 0);

	/* the CQ a QP uses cannot go */
	fk.fail_destroy_cq = EBUSY;
	assert_int_equal(ql_cq_destroy(cq), -EBUSY);
	expect_detail("a QP still uses it?");
	fk.fail_destroy_cq = 0;
	/* -1 and errno from libibverbs */
	fk.fail_destroy_qp = 1;
	assert_int_equal(ql_qp_destroy(qp), -EBUSY);
	fk.fail_destroy_qp = 0;
	assert_int_equal(ql_qp_destroy(qp), 0);
	assert_int_equal(ql_cq_destroy(cq), 0);
	assert_int_equal(ql_cq_destroy(ocq), 0);
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), 0);
	assert_int_equal(ql_device_close(other), 0);
}

static void test_modify_query(void **state)
{
	struct ql_qp_init_attr ia;
	struct ql_conn_params lp, rp;
	struct ibv_qp_attr a;
	struct objs o;

	(void)state;
	fk.nports = 2;
	objs_create(&o, "ibv://fake0:2:1", IBV_QPT_RC);
	assert_int_equal(ql_qp_state(o.qp), IBV_QPS_RESET);

	/* connect: the local half of the address vector is the URI's */
	assert_int_equal(ql_qp_local_params(o.qp, &lp), 0);
	assert_int_equal(lp.qpn, ql_qp_num(o.qp));
	assert_memory_equal(lp.gid.raw, fk.gid[1].raw, 16);
	memset(&rp, 0, sizeof(rp));
	rp.qpn = 0x4242;
	rp.gid = lp.gid;
	rp.mtu = IBV_MTU_4096; /* more than the port's: the port's is used */
	assert_int_equal(ql_qp_connect(o.qp, &rp, NULL), 0);
	assert_int_equal(ql_qp_state(o.qp), IBV_QPS_RTS);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.dest_qp_num = 9;
	assert_int_equal(ql_qp_modify(o.qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN), 0);
	assert_int_equal(fk.last_attr.ah_attr.port_num, 2);
	assert_int_equal(fk.last_attr.ah_attr.grh.sgid_index, 1);
	assert_int_equal(fk.last_attr.ah_attr.grh.hop_limit, 64);
	assert_int_equal(fk.last_attr.dest_qp_num, 9);
	a.ah_attr.grh.hop_limit = 3; /* the caller's own is kept */
	assert_int_equal(ql_qp_modify(o.qp, &a, IBV_QP_AV), 0);
	assert_int_equal(fk.last_attr.ah_attr.grh.hop_limit, 3);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	assert_int_equal(ql_qp_modify(o.qp, &a, IBV_QP_STATE | IBV_QP_PORT), 0);
	assert_int_equal(fk.last_attr.port_num, 2); /* "port 1" means the URI's port */

	fk.fail_modify_qp = EINVAL;
	assert_int_equal(ql_qp_modify(o.qp, &a, IBV_QP_STATE), -EINVAL);
	expect_detail("ibv_modify_qp(mask 0x1)");
	assert_int_equal(ql_qp_connect(o.qp, &rp, NULL), -EINVAL);
	fk.fail_modify_qp = 0;

	assert_int_equal(ql_qp_query(o.qp, &a, IBV_QP_STATE, &ia), 0);
	assert_int_equal(a.qp_state, IBV_QPS_INIT);
	assert_ptr_equal(ia.send_cq, o.cq);
	assert_ptr_equal(ia.recv_cq, o.cq);
	assert_int_equal(ia.qp_type, IBV_QPT_RC);
	assert_int_equal(ia.cap.max_inline_data, 64);
	assert_int_equal(ql_qp_query(o.qp, &a, IBV_QP_STATE, NULL), 0);
	fk.fail_query_qp = ENODEV;
	assert_int_equal(ql_qp_query(o.qp, &a, IBV_QP_STATE, &ia), -ENODEV);
	fk.fail_query_qp = 0;
	objs_destroy(&o);
}

static void test_post_state_check(void **state)
{
	struct ibv_send_wr sw = { .wr_id = 1, .opcode = IBV_WR_SEND }, *sbad;
	struct ibv_recv_wr rw = { .wr_id = 2 }, *rbad;
	struct ibv_qp_attr a;
	struct ibv_wc wc;
	struct objs o;

	(void)state;
	objs_create(&o, "ibv://fake0", IBV_QPT_UC);
	/* RESET: neither is handed to the device */
	sbad = NULL;
	assert_int_equal(ql_qp_post_send(o.qp, &sw, &sbad), -EINVAL);
	assert_ptr_equal(sbad, &sw);
	rbad = NULL;
	assert_int_equal(ql_qp_post_recv(o.qp, &rw, &rbad), -EINVAL);
	assert_ptr_equal(rbad, &rw);
	/* INIT and RTR: receives go, sends do not */
	memset(&a, 0, sizeof(a));
	for (int s = IBV_QPS_INIT; s <= IBV_QPS_RTR; s++) {
		a.qp_state = (enum ibv_qp_state)s;
		assert_int_equal(ql_qp_modify(o.qp, &a, IBV_QP_STATE), 0);
		sbad = NULL;
		assert_int_equal(ql_qp_post_send(o.qp, &sw, &sbad), -EINVAL);
		assert_ptr_equal(sbad, &sw);
		assert_int_equal(ql_qp_post_recv(o.qp, &rw, &rbad), 0);
	}
	assert_int_equal(fk.post_send_calls, 0);
	assert_int_equal(fk.post_recv_calls, 2);
	/* RTS: handed over as it is; a positive errno from the device negated */
	a.qp_state = IBV_QPS_RTS;
	assert_int_equal(ql_qp_modify(o.qp, &a, IBV_QP_STATE), 0);
	assert_int_equal(ql_qp_post_send(o.qp, &sw, &sbad), 0);
	sw.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	assert_int_equal(ql_qp_post_send(o.qp, &sw, &sbad), -EINVAL);
	assert_int_equal(fk.post_send_calls, 2);

	/* completions pass through; a device error is -EIO */
	fk.poll_ret = 0;
	assert_int_equal(ql_cq_poll(o.cq, 1, &wc), 0);
	fk.poll_ret = 1;
	assert_int_equal(ql_cq_poll(o.cq, 1, &wc), 1);
	assert_int_equal(wc.wr_id, 77);
	assert_int_equal(wc.status, IBV_WC_REM_ACCESS_ERR);
	fk.poll_ret = -1;
	assert_int_equal(ql_cq_poll(o.cq, 1, &wc), -EIO);
	objs_destroy(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_no_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_uri, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gid_choice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inline_probe, setup, teardown),
		cmocka_unit_test_setup_teardown(test_device_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters_unsupported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pd_mr_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cq_qp_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_modify_query, setup, teardown),
		cmocka_unit_test_setup_teardown(test_post_state_check, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
