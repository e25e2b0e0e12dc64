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
 * nothing handed to the device below RTS). And GPU memory (QL_MEM_GPU)
 * against a stand-in CUDA driver: device memory registered through its
 * dmabuf with the right fd, offset, length, iova and access, the fallback
 * to peer memory in order, the failure naming both; the soft NIC's
 * host-mapped kind; and, with the real driver absent, -ENODEV and why.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuda_fake.h"
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
	void *last_addr;
	/* ibv_reg_dmabuf_mr */
	int fail_reg_dmabuf; /* errno to fail with */
	int dmabuf_calls;
	uint64_t dmabuf_offset, dmabuf_iova;
	size_t dmabuf_length;
	int dmabuf_fd, dmabuf_access;
	bool dmabuf_fd_open; /* the fd was open when registered */
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
	fk.last_addr = addr;
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

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
				 int fd, int access)
{
	struct ibv_mr *mr;

	fk.dmabuf_calls++;
	fk.dmabuf_offset = offset;
	fk.dmabuf_length = length;
	fk.dmabuf_iova = iova;
	fk.dmabuf_fd = fd;
	fk.dmabuf_access = access;
	fk.dmabuf_fd_open = fcntl(fd, F_GETFD) != -1;
	if (fk.fail_reg_dmabuf) {
		errno = fk.fail_reg_dmabuf;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	mr->context = pd->context;
	mr->pd = pd;
	mr->length = length;
	mr->lkey = 0x3000u + (uint32_t)fk.live_mr;
	mr->rkey = 0x4000u + (uint32_t)fk.live_mr;
	fk.live_mr++;
	return mr;
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

/* ---- GPU memory against a stand-in CUDA driver ------------------------------ */

static int cu_setup(void **state)
{
	setup(state);
	cu_fake_install();
	return 0;
}

static int cu_teardown(void **state)
{
	ql__cuda_drv_override(NULL);
	assert_int_equal(cu.allocs, 0);
	assert_int_equal(cu.host_regs, 0);
	assert_int_equal(cu.pushed, 0);
	return teardown(state);
}

static const struct ql_mem_attr gpu0 = { .kind = QL_MEM_GPU, .cuda_device = 0 };
#define RW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/* Device memory on ibv: page-aligned inside what cuMemAlloc gave, zeroed,
 * SYNC_MEMOPS set; registered through the dmabuf of exactly the pages the
 * range touches, at the range's offset in them, with the caller's access
 * and iova; the fd closed once registered. */
static void test_gpu_mem_dmabuf(void **state)
{
	struct ql_device *dev = open_ok("ibv://fake0");
	long ps = sysconf(_SC_PAGESIZE);
	struct ql_mem_info mi;
	struct ql_pd *pd;
	struct ql_mr *mr;
	uint8_t *g;

	(void)state;
	assert_int_equal(ql_pd_alloc(dev, &pd), 0);
	assert_int_equal(ql_pd_mem_alloc_attr(pd, 3 * (size_t)ps - 5, &gpu0, (void **)&g), 0);
	assert_int_equal(cu.allocs, 1);
	assert_int_equal((uintptr_t)g % (uintptr_t)ps, 0);
	assert_true((uint64_t)(uintptr_t)g >= cu.raw);
	assert_true((uint64_t)(uintptr_t)g + 3 * (uint64_t)ps <= cu.raw + cu.raw_len);
	assert_true(cu.memset_ptr == (uintptr_t)g);
	assert_int_equal(cu.memset_len, 3 * ps);
	assert_true(cu.sync_ptr == (uintptr_t)g);
	assert_int_equal(cu.pushed, 0);
	assert_int_equal(ql_pd_mem_query(pd, g + 7, &mi), 0);
	assert_int_equal(mi.kind, QL_MEM_GPU);
	assert_int_equal(mi.path, QL_MEM_PATH_DEVICE);
	assert_ptr_equal(mi.addr, g);
	assert_int_equal(mi.length, 3 * ps);
	assert_true(mi.device_addr == (uintptr_t)g);
	/* the CPU cannot touch it: copies go through the driver */
	{
		char b[16] = "ring header";

		assert_int_equal(ql_pd_mem_write(pd, g + 8, b, sizeof(b)), 0);
		assert_int_equal(cu.copies, 1);
		assert_true(cu.copy_dev == (uintptr_t)g + 8);
		assert_ptr_equal(cu.copy_host, b);
		assert_int_equal(cu.copy_len, sizeof(b));
		assert_int_equal(ql_pd_mem_read(pd, b, g + 3 * ps - 16, 16), 0);
		assert_int_equal(cu.copies, 0);
		assert_true(cu.copy_dev == (uintptr_t)g + 3 * (uint64_t)ps - 16);
		assert_int_equal(ql_pd_mem_read(pd, b, g + 3 * ps - 15, 16), -EINVAL);
		assert_int_equal(ql_pd_mem_write(pd, b, b, 1), -EINVAL);
		expect_detail("not inside memory from ql_pd_mem_alloc()");
	}

	assert_int_equal(ql_mr_reg(pd, g + 100, (size_t)ps, RW, &mr), 0);
	assert_int_equal(ql_mr_gpu_reg(mr), QL_MR_GPU_DMABUF);
	assert_int_equal(cu.handle_calls, 1);
	assert_int_equal(cu.handle_type, QL__CUDA_HANDLE_DMA_BUF_FD);
	assert_true(cu.handle_ptr == (uintptr_t)g); /* the pages touched */
	assert_int_equal(cu.handle_size, 2 * ps);
	assert_int_equal(fk.dmabuf_calls, 1);
	assert_true(fk.dmabuf_fd_open);
	assert_int_equal(fk.dmabuf_fd, cu.handle_fd);
	assert_true(fk.dmabuf_offset == 100);
	assert_int_equal(fk.dmabuf_length, ps);
	assert_true(fk.dmabuf_iova == (uintptr_t)g + 100);
	assert_int_equal(fk.dmabuf_access, RW);
	assert_int_equal(fcntl(cu.handle_fd, F_GETFD), -1); /* closed after */
	assert_int_equal(ql_mr_rkey(mr), 0x4000);
	assert_ptr_equal(ql_mr_addr(mr), g + 100);
	/* memory still registered is not freed */
	assert_int_equal(ql_pd_mem_free(pd, g), -EBUSY);
	assert_int_equal(ql_mr_dereg(mr), 0);

	/* at an iova: the iova given, not the address */
	assert_int_equal(ql_mr_reg_iova(pd, g, 3 * (size_t)ps, 0, RW, &mr), 0);
	assert_int_equal(ql_mr_gpu_reg(mr), QL_MR_GPU_DMABUF);
	assert_true(fk.dmabuf_iova == 0 && fk.dmabuf_offset == 0);
	assert_int_equal(cu.handle_size, 3 * ps);
	assert_int_equal(ql_mr_dereg(mr), 0);
	/* a range past the end of the GPU memory: refused, nothing called */
	assert_int_equal(ql_mr_reg(pd, g + ps, 3 * (size_t)ps, RW, &mr), -EINVAL);
	expect_detail("past the end of its GPU memory");
	assert_int_equal(fk.dmabuf_calls, 2);

	/* host memory on the same PD: the plain path */
	{
		void *h;

		assert_int_equal(ql_pd_mem_alloc(pd, 64, &h), 0);
		assert_int_equal(ql_pd_mem_query(pd, h, &mi), 0);
		assert_int_equal(mi.kind, QL_MEM_HOST);
		assert_int_equal(mi.path, QL_MEM_PATH_HOST);
		assert_int_equal(ql_mr_reg(pd, h, 64, RW, &mr), 0);
		assert_int_equal(ql_mr_gpu_reg(mr), QL_MR_GPU_NONE);
		assert_int_equal(fk.dmabuf_calls, 2);
		assert_int_equal(ql_mr_dereg(mr), 0);
		assert_int_equal(ql_pd_mem_free(pd, h), 0);
	}
	assert_int_equal(ql_pd_mem_query(pd, &mi, &mi), -ENOENT);
	assert_int_equal(ql_pd_free(pd), -EBUSY); /* GPU memory outstanding */
	assert_int_equal(ql_pd_mem_free(pd, g), 0);
	assert_int_equal(cu.allocs, 0);
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), 0);
}

/* The fallback order: no dmabuf from the device, the driver or
 * libibverbs -> peer memory (ibv_reg_mr of the device pointer); both
 * failing -> the peer path's errno, the detail naming both. */
static void test_gpu_mem_fallback(void **state)
{
	struct ql_device *dev = open_ok("ibv://fake0");
	struct ql_pd *pd;
	struct ql_mr *mr;
	uint8_t *g;

	(void)state;
	assert_int_equal(ql_pd_alloc(dev, &pd), 0);
	assert_int_equal(ql_pd_mem_alloc_attr(pd, 8192, &gpu0, (void **)&g), 0);

	/* the device exports no dmabuf: not even asked for a handle */
	cu.dmabuf = false;
	assert_int_equal(ql_mr_reg(pd, g, 8192, RW, &mr), 0);
	assert_int_equal(ql_mr_gpu_reg(mr), QL_MR_GPU_PEERMEM);
	assert_int_equal(cu.handle_calls, 0);
	assert_int_equal(fk.dmabuf_calls, 0);
	assert_ptr_equal(fk.last_addr, g);
	assert_true(fk.last_iova == (uintptr_t)g);
	assert_int_equal(fk.last_access, RW);
	assert_int_equal(ql_mr_dereg(mr), 0);

	/* a driver without cuMemGetHandleForAddressRange */
	cu.dmabuf = true;
	cu_drv.mem_get_handle = NULL;
	assert_int_equal(ql_mr_reg(pd, g, 8192, RW, &mr), 0);
	assert_int_equal(ql_mr_gpu_reg(mr), QL_MR_GPU_PEERMEM);
	assert_int_equal(fk.dmabuf_calls, 0);
	assert_int_equal(ql_mr_dereg(mr), 0);
	cu_drv.mem_get_handle = cu_handle;

	/* libibverbs refuses the dmabuf (an old kernel): peer memory next,
	 * the fd closed all the same */
	fk.fail_reg_dmabuf = EOPNOTSUPP;
	assert_int_equal(ql_mr_reg(pd, g, 8192, RW, &mr), 0);
	assert_int_equal(ql_mr_gpu_reg(mr), QL_MR_GPU_PEERMEM);
	assert_int_equal(fk.dmabuf_calls, 1);
	assert_int_equal(fcntl(cu.handle_fd, F_GETFD), -1);
	assert_ptr_equal(fk.last_addr, g);
	assert_int_equal(ql_mr_dereg(mr), 0);

	/* and peer memory refused too (no nvidia-peermem: EFAULT) */
	fk.fail_reg_mr = EFAULT;
	assert_int_equal(ql_mr_reg(pd, g, 8192, RW, &mr), -EFAULT);
	expect_detail("GPU memory registration failed: dmabuf: ibv_reg_dmabuf_mr");
	expect_detail("; peer memory: ibv_reg_mr");
	expect_detail("nvidia_peermem");
	fk.fail_reg_mr = 0;
	fk.fail_reg_dmabuf = 0;
	assert_int_equal(fk.live_mr, 0);

	assert_int_equal(ql_pd_mem_free(pd, g), 0);
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), 0);
}

/* The soft NIC: its own memory, mapped into the GPU (the kernels' address
 * from cuMemHostGetDevicePointer), registered as host memory. */
static void test_gpu_mem_soft(void **state)
{
	struct ql_device *dev;
	struct ql_mem_info mi;
	struct ql_pd *pd;
	struct ql_mr *mr;
	uint8_t *g;

	(void)state;
	assert_int_equal(ql_device_open("soft://loop", &dev), 0);
	assert_int_equal(ql_pd_alloc(dev, &pd), 0);
	assert_int_equal(ql_pd_mem_alloc_attr(pd, 100, &gpu0, (void **)&g), 0);
	assert_int_equal(cu.allocs, 0);
	assert_int_equal(cu.host_regs, 1);
	assert_ptr_equal(cu.host_reg_ptr, g);
	assert_int_equal(cu.host_reg_len, sysconf(_SC_PAGESIZE));
	assert_int_equal(cu.host_reg_flags,
			 QL__CUDA_HOSTREGISTER_PORTABLE | QL__CUDA_HOSTREGISTER_DEVICEMAP);
	g[0] = 1; /* host memory: the CPU (and the soft NIC) use it */
	assert_int_equal(ql_pd_mem_write(pd, g + 1, "x", 1), 0);
	assert_int_equal(g[1], 'x');
	assert_int_equal(cu.copies, 0);
	assert_int_equal(ql_pd_mem_query(pd, g, &mi), 0);
	assert_int_equal(mi.path, QL_MEM_PATH_HOST_MAPPED);
	assert_true(mi.device_addr == (uintptr_t)g + 0x1000000);
	assert_int_equal(ql_mr_reg(pd, g, 100, RW, &mr), 0);
	assert_int_equal(ql_mr_gpu_reg(mr), QL_MR_GPU_NONE);
	assert_int_equal(cu.handle_calls, 0);
	assert_int_equal(ql_mr_dereg(mr), 0);
	assert_int_equal(ql_pd_mem_free(pd, g), 0);
	assert_int_equal(cu.host_regs, 0);
	assert_ptr_equal(cu.host_unreg_ptr, g);

	/* a GPU that cannot map host memory; a device that does not exist */
	cu.can_map = false;
	assert_int_equal(ql_pd_mem_alloc_attr(pd, 100, &gpu0, (void **)&g), -EOPNOTSUPP);
	expect_detail("cannot map host memory");
	{
		struct ql_mem_attr gpu1 = { .kind = QL_MEM_GPU, .cuda_device = 1 };

		assert_int_equal(ql_pd_mem_alloc_attr(pd, 100, &gpu1, (void **)&g), -ENODEV);
		expect_detail("CUDA device 1: CUDA_ERROR_INVALID_DEVICE");
		gpu1.kind = (enum ql_mem_kind)7;
		assert_int_equal(ql_pd_mem_alloc_attr(pd, 100, &gpu1, (void **)&g), -EINVAL);
		expect_detail("unknown memory kind 7");
	}
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), 0);
}

/* The real driver: where libcuda.so.1 cannot be loaded or sees no GPU (this
 * CI), QL_MEM_GPU fails with -ENODEV and says why, on every provider;
 * where one works, the allocation succeeds instead (skipped). */
static void test_gpu_mem_no_cuda(void **state)
{
	const struct ql__cuda_drv *drv;
	struct ql_device *dev;
	struct ql_pd *pd;
	void *g;

	(void)state;
	ql__cuda_drv_override(NULL);
	if (!ql__cuda_drv_get(&drv))
		skip(); /* a machine with a GPU: tests/cuda and scripts/gpu-check.sh */
	for (int i = 0; i < 2; i++) {
		dev = open_ok(i ? "soft://loop" : "ibv://fake0");
		assert_int_equal(ql_pd_alloc(dev, &pd), 0);
		assert_int_equal(ql_pd_mem_alloc_attr(pd, 4096, &gpu0, &g), -ENODEV);
		assert_null(g);
		expect_detail("QL_MEM_GPU: ");
		{
			const char *d = ql_error_detail();

			if (!strstr(d, "no CUDA driver (libcuda.so.1") && !strstr(d, "cuInit: ") &&
			    !strstr(d, "sees no GPU") && !strstr(d, "driver too old"))
				fail_msg("detail '%s' says no reason", d);
		}
		assert_int_equal(ql_pd_free(pd), 0);
		assert_int_equal(ql_device_close(dev), 0);
	}
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
		cmocka_unit_test_setup_teardown(test_gpu_mem_dmabuf, cu_setup, cu_teardown),
		cmocka_unit_test_setup_teardown(test_gpu_mem_fallback, cu_setup, cu_teardown),
		cmocka_unit_test_setup_teardown(test_gpu_mem_soft, cu_setup, cu_teardown),
		cmocka_unit_test_setup_teardown(test_gpu_mem_no_cuda, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
