/* SPDX-License-Identifier: MIT */
/*
 * The provider registry and PD-scoped memory: which scheme reaches which
 * provider, what reserved and unknown schemes say, device listing, the
 * bookkeeping the verbs layer keeps for every provider (PD/CQ counts), and
 * ql_pd_mem_alloc/ql_pd_mem_free on every device kind, with their error
 * paths and a peer process writing into soft+shm PD memory by RDMA WRITE.
 */
#include "verbs_fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096u

static int open_named(const char *scheme, struct ql_device **dev)
{
	static unsigned int seq;
	char uri[QL_DEVICE_URI_MAX];

	snprintf(uri, sizeof(uri), "%s://qlreg-%d-%u", scheme, (int)getpid(), seq++);
	return ql_device_open(uri, dev);
}

/* ---- the registry (provider independent) ----------------------------- */

static void expect_query(struct ql_device *dev, const char *provider, const char *wire)
{
	struct ql_device_attr a;

	assert_int_equal(ql_device_query(dev, &a), 0);
	assert_string_equal(a.provider, provider);
	assert_string_equal(a.wire, wire);
}

static void test_scheme_each_provider(void **state)
{
	struct ql_device *dev;
	int ret;

	(void)state;
	assert_int_equal(ql_device_open("soft://loop", &dev), 0);
	expect_query(dev, "soft", "loop");
	assert_int_equal(ql_device_close(dev), 0);

	assert_int_equal(open_named("soft+shm", &dev), 0);
	expect_query(dev, "soft", "shm");
	assert_int_equal(ql_device_close(dev), 0);

	/* soft:// serves only loop: the soft provider, not the registry, says so */
	assert_int_equal(ql_device_open("soft://other", &dev), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "soft://loop"));

	/* ibv:// reaches the ibv provider: a device that is not there is its
	 * -ENODEV (with what it found), never an unknown scheme */
	ret = ql_device_open("ibv://qlink_no_such_dev0", &dev);
	assert_int_equal(ret, -ENODEV);
	assert_non_null(strstr(ql_error_detail(), "no RDMA device named 'qlink_no_such_dev0'"));
	assert_null(strstr(ql_error_detail(), "unknown device scheme"));
}

static void test_scheme_reserved(void **state)
{
	struct ql_device *dev = (struct ql_device *)(uintptr_t)1;

	(void)state;
	/* soft+udp was the reserved entry; it is served now: an address
	 * that is not this host's is the socket's refusal, not the scheme's */
	assert_int_equal(ql_device_open("soft+udp://192.0.2.1", &dev), -EADDRNOTAVAIL);
	assert_null(dev);
	assert_non_null(strstr(ql_error_detail(), "soft+udp://192.0.2.1"));
	assert_null(strstr(ql_error_detail(), "not supported yet"));
}

static void test_scheme_unknown(void **state)
{
	/* near misses of real schemes are unknown too: exact match only */
	static const char *const bad[] = { "foo://x",	    "SOFT://loop", "sof://loop",
					   "soft+shmx://a", "://loop",	   "ibv+x://mlx5_0",
					   "soft+://loop" };
	struct ql_device *dev;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *d;

		assert_int_equal(ql_device_open(bad[i], &dev), -EPROTONOSUPPORT);
		d = ql_error_detail();
		assert_non_null(strstr(d, "unknown device scheme"));
		/* the known schemes come from the table, reserved ones apart */
		assert_non_null(strstr(d, "known: soft, soft+shm, ibv, soft+udp"));
		assert_null(strstr(d, "reserved"));
	}
	assert_int_equal(ql_device_open("soft+shm:/x", &dev), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "soft, soft+shm, ibv"));
	assert_int_equal(ql_device_open(NULL, &dev), -EINVAL);
	assert_int_equal(ql_device_open("soft://loop", NULL), -EINVAL);
}

static void test_device_list(void **state)
{
	char uris[8][QL_DEVICE_URI_MAX];
	char one[2][QL_DEVICE_URI_MAX];
	int n;

	(void)state;
	n = ql_device_list(NULL, 0);
	assert_true(n >= 2);
	assert_int_equal(ql_device_list(uris, 8), n);
	/* table order: soft lists first */
	assert_string_equal(uris[0], "soft://loop");
	assert_string_equal(uris[1], "soft+shm://NAME");
	/* then the ibv devices, then the soft+udp template */
	for (int i = 2; i < n - 1 && i < 8; i++)
		assert_memory_equal(uris[i], "ibv://", 6);
	if (n <= 8)
		assert_string_equal(uris[n - 1], "soft+udp://IP[:PORT]");
	/* fewer slots than devices: the count, and nothing past max written */
	memset(one, 0x5a, sizeof(one));
	assert_int_equal(ql_device_list(one, 1), n);
	assert_string_equal(one[0], "soft://loop");
	assert_int_equal((unsigned char)one[1][0], 0x5a);
	assert_int_equal(ql_device_list(NULL, 1), -EINVAL);
	assert_int_equal(ql_device_list(uris, -1), -EINVAL);

	/* what is listed opens (a NAME template with any name) */
	for (int i = 0; i < n && i < 8; i++) {
		struct ql_device *dev;
		char uri[QL_DEVICE_URI_MAX];
		char *sep = strstr(uris[i], "://");

		assert_non_null(sep);
		if (!strcmp(sep + 3, "NAME"))
			snprintf(uri, sizeof(uri), "%.*sqlreg%d", (int)(sep + 3 - uris[i]), uris[i],
				 (int)getpid());
		else if (!strcmp(sep + 3, "IP[:PORT]")) /* a loopback address, a free port */
			snprintf(uri, sizeof(uri), "%.*s127.0.%u.%u:0", (int)(sep + 3 - uris[i]),
				 uris[i], ((unsigned)getpid() >> 8) & 0xff,
				 (unsigned)getpid() & 0xff);
		else
			memcpy(uri, uris[i], sizeof(uri));
		assert_int_equal(ql_device_open(uri, &dev), 0);
		assert_int_equal(ql_device_close(dev), 0);
	}
}

/* The verbs layer counts PDs and CQs for every provider. */
static void test_close_busy_counts(void **state)
{
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *cq1, *cq2;

	(void)state;
	assert_int_equal(open_named("soft+shm", &dev), 0);
	assert_int_equal(ql_pd_alloc(dev, &pd), 0);
	assert_int_equal(ql_cq_create(dev, 4, &cq1), 0);
	assert_int_equal(ql_cq_create(dev, 4, &cq2), 0);
	assert_int_equal(ql_cq_create(dev, 0, &cq2), -EINVAL);
	assert_int_equal(ql_device_close(dev), -EBUSY);
	assert_non_null(strstr(ql_error_detail(), "1 PDs and 2 CQs"));
	assert_int_equal(ql_cq_destroy(cq1), 0);
	assert_int_equal(ql_device_close(dev), -EBUSY);
	assert_non_null(strstr(ql_error_detail(), "1 PDs and 1 CQs"));
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), -EBUSY);
	assert_int_equal(ql_cq_destroy(cq2), 0);
	assert_int_equal(ql_device_close(dev), 0);
}

/* Scoping is real: soft://loop PD memory is ordinary memory, which a
 * soft+shm device refuses for remote access; soft+shm PD memory and the
 * global ql_mem_alloc() are the shared heap. */
static void test_scope_loop_vs_shm(void **state)
{
	struct ql_device *loop, *shm;
	struct ql_pd *lpd, *spd;
	struct ql_mr *mr;
	void *lmem, *smem, *gmem;

	(void)state;
	assert_int_equal(ql_device_open("soft://loop", &loop), 0);
	assert_int_equal(open_named("soft+shm", &shm), 0);
	assert_int_equal(ql_pd_alloc(loop, &lpd), 0);
	assert_int_equal(ql_pd_alloc(shm, &spd), 0);
	assert_int_equal(ql_pd_mem_alloc(lpd, PAGE, &lmem), 0);
	assert_int_equal(ql_pd_mem_alloc(spd, PAGE, &smem), 0);
	gmem = ql_mem_alloc(PAGE);
	assert_non_null(gmem);

	assert_int_equal(ql_mr_reg(spd, lmem, PAGE, VT_ACCESS_ALL, &mr), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "ql_pd_mem_alloc"));
	/* local access to it is fine */
	assert_int_equal(ql_mr_reg(spd, lmem, PAGE, IBV_ACCESS_LOCAL_WRITE, &mr), 0);
	assert_int_equal(ql_mr_dereg(mr), 0);
	assert_int_equal(ql_mr_reg(spd, smem, PAGE, VT_ACCESS_ALL, &mr), 0);
	assert_int_equal(ql_mr_dereg(mr), 0);
	assert_int_equal(ql_mr_reg(spd, gmem, PAGE, VT_ACCESS_ALL, &mr), 0);
	assert_int_equal(ql_mr_dereg(mr), 0);

	/* memory of one PD is not another's, nor is ql_mem_alloc's */
	assert_int_equal(ql_pd_mem_free(spd, lmem), -EINVAL);
	assert_int_equal(ql_pd_mem_free(lpd, smem), -EINVAL);
	assert_int_equal(ql_pd_mem_free(spd, gmem), -EINVAL);
	assert_int_equal(ql_pd_mem_free(lpd, lmem), 0);
	assert_int_equal(ql_pd_mem_free(spd, smem), 0);
	ql_mem_free(gmem);

	errno = 0;
	assert_null(ql_mem_alloc(0));
	assert_int_equal(errno, EINVAL);
	assert_null(ql_mem_alloc(SIZE_MAX));
	assert_int_equal(errno, EINVAL);

	assert_int_equal(ql_pd_free(lpd), 0);
	assert_int_equal(ql_pd_free(spd), 0);
	assert_int_equal(ql_device_close(loop), 0);
	assert_int_equal(ql_device_close(shm), 0);
}

/* ---- PD-scoped memory, per device kind --------------------------------- */

struct mem_env {
	struct ql_device *dev;
	struct ql_pd *pd;
};

static void env_open(const struct vt_param *p, struct mem_env *e)
{
	assert_int_equal(vt_dev_open(p, &e->dev), 0);
	assert_int_equal(ql_pd_alloc(e->dev, &e->pd), 0);
}

static void env_close(struct mem_env *e)
{
	assert_int_equal(ql_pd_free(e->pd), 0);
	assert_int_equal(ql_device_close(e->dev), 0);
}

static bool all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

static void test_pd_mem_alloc(void **state)
{
	struct mem_env e;
	struct ql_mr *mr;
	uint8_t *a, *b;

	env_open(*state, &e);
	/* rounded up to whole pages, page-aligned, zeroed, writable */
	assert_int_equal(ql_pd_mem_alloc(e.pd, 1, (void **)&a), 0);
	assert_int_equal((uintptr_t)a % PAGE, 0);
	assert_true(all_zero(a, PAGE));
	memset(a, 0xab, PAGE);
	assert_int_equal(ql_pd_mem_alloc(e.pd, 3 * PAGE + 1, (void **)&b), 0);
	assert_int_equal((uintptr_t)b % PAGE, 0);
	assert_true(all_zero(b, 4 * PAGE));
	b[4 * PAGE - 1] = 1;
	assert_true(b + 4 * PAGE <= a || a + PAGE <= b); /* disjoint */
	/* registrable on its PD with every access right */
	assert_int_equal(ql_mr_reg(e.pd, b, 4 * PAGE, VT_ACCESS_ALL, &mr), 0);
	assert_int_equal(ql_mr_dereg(mr), 0);
	assert_int_equal(ql_pd_mem_free(e.pd, a), 0);
	assert_int_equal(ql_pd_mem_free(e.pd, b), 0);
	/* freed memory comes back zeroed */
	assert_int_equal(ql_pd_mem_alloc(e.pd, PAGE, (void **)&a), 0);
	assert_true(all_zero(a, PAGE));
	assert_int_equal(ql_pd_mem_free(e.pd, a), 0);
	env_close(&e);
}

static void test_pd_mem_errors(void **state)
{
	struct mem_env e;
	struct ql_pd *other;
	uint8_t *a, *o, *g;
	void *x = (void *)(uintptr_t)1;
	int local;

	env_open(*state, &e);
	assert_int_equal(ql_pd_alloc(e.dev, &other), 0);

	assert_int_equal(ql_pd_mem_alloc(NULL, PAGE, &x), -EINVAL);
	assert_int_equal(ql_pd_mem_alloc(e.pd, PAGE, NULL), -EINVAL);
	assert_int_equal(ql_pd_mem_alloc(e.pd, 0, &x), -EINVAL);
	assert_null(x);
	assert_true(strlen(ql_error_detail()) > 0);
	assert_int_equal(ql_pd_mem_alloc(e.pd, SIZE_MAX, &x), -EINVAL);
	assert_int_equal(ql_pd_mem_alloc(e.pd, SIZE_MAX - PAGE + 2, &x), -EINVAL);
	/* representable but not available: the provider's -ENOMEM, no record */
	assert_int_equal(ql_pd_mem_alloc(e.pd, (size_t)1 << 60, &x), -ENOMEM);
	assert_null(x);

	assert_int_equal(ql_pd_mem_alloc(e.pd, 2 * PAGE, (void **)&a), 0);
	assert_int_equal(ql_pd_mem_alloc(other, PAGE, (void **)&o), 0);
	g = ql_mem_alloc(PAGE);
	assert_non_null(g);
	assert_int_equal(ql_pd_mem_free(NULL, a), -EINVAL);
	assert_int_equal(ql_pd_mem_free(e.pd, NULL), -EINVAL);
	assert_int_equal(ql_pd_mem_free(e.pd, o), -EINVAL); /* another PD's */
	assert_non_null(strstr(ql_error_detail(), "not memory from ql_pd_mem_alloc() on this PD"));
	assert_int_equal(ql_pd_mem_free(e.pd, a + PAGE), -EINVAL); /* interior */
	assert_int_equal(ql_pd_mem_free(e.pd, g), -EINVAL);	   /* ql_mem_alloc's */
	assert_int_equal(ql_pd_mem_free(e.pd, &local), -EINVAL);   /* the stack */
	/* refused frees left everything usable */
	memset(a, 1, 2 * PAGE);
	memset(o, 2, PAGE);
	assert_int_equal(ql_pd_mem_free(e.pd, a), 0);
	assert_int_equal(ql_pd_mem_free(e.pd, a), -EINVAL); /* twice */
	assert_int_equal(ql_pd_mem_free(other, o), 0);
	ql_mem_free(g);
	assert_int_equal(ql_pd_free(other), 0);
	env_close(&e);
}

/* Memory keeps its PD, and the PD its device: a PD with memory cannot be
 * freed, so the device cannot be closed under it. Memory still registered
 * (by any MR, on any PD) cannot be freed: a peer holding the rkey would
 * write into whatever reused it. */
static void test_pd_mem_lifetime(void **state)
{
	struct mem_env e;
	struct ql_mr *mr, *mr2;
	struct ql_pd *other;
	uint8_t *c;
	void *a, *b;

	env_open(*state, &e);
	assert_int_equal(ql_pd_alloc(e.dev, &other), 0);
	assert_int_equal(ql_pd_mem_alloc(e.pd, 3 * PAGE, (void **)&c), 0);
	/* an MR over its last page only, on the same PD */
	assert_int_equal(ql_mr_reg(e.pd, c + 2 * PAGE, 100, VT_ACCESS_ALL, &mr), 0);
	/* and one over its first page, on another PD */
	assert_int_equal(ql_mr_reg(other, c, PAGE, IBV_ACCESS_LOCAL_WRITE, &mr2), 0);
	assert_int_equal(ql_pd_mem_free(e.pd, c), -EBUSY);
	assert_non_null(strstr(ql_error_detail(), "still registered"));
	assert_int_equal(ql_mr_dereg(mr), 0);
	assert_int_equal(ql_pd_mem_free(e.pd, c), -EBUSY);
	assert_int_equal(ql_mr_dereg(mr2), 0);
	assert_int_equal(ql_pd_mem_free(e.pd, c), 0);
	assert_int_equal(ql_pd_free(other), 0);

	assert_int_equal(ql_pd_mem_alloc(e.pd, PAGE, &a), 0);
	assert_int_equal(ql_pd_mem_alloc(e.pd, PAGE, &b), 0);
	assert_int_equal(ql_pd_free(e.pd), -EBUSY);
	assert_non_null(strstr(ql_error_detail(), "ql_pd_mem_alloc"));
	assert_int_equal(ql_device_close(e.dev), -EBUSY);
	/* still fully usable */
	memset(a, 3, PAGE);
	assert_int_equal(ql_pd_mem_free(e.pd, a), 0);
	assert_int_equal(ql_pd_free(e.pd), -EBUSY);
	assert_int_equal(ql_pd_mem_free(e.pd, b), 0);
	env_close(&e);
}

/* PD memory is what a peer reaches: b's PD memory, registered
 * REMOTE_WRITE, receives a's RDMA WRITE. */
static void test_pd_mem_rdma_write(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;
	struct ql_mr *mr;
	uint8_t *t;

	assert_int_equal(ql_pd_mem_alloc(pr->b.pd, PAGE, (void **)&t), 0);
	assert_int_equal(ql_mr_reg(pr->b.pd, t, PAGE, VT_ACCESS_ALL, &mr), 0);
	for (int i = 0; i < 256; i++)
		pr->a.buf[i] = (uint8_t)(i ^ 0x5a);
	assert_int_equal(vt_post_write(pr->a.qp, 7, pr->a.buf, 256, ql_mr_lkey(pr->a.mr),
				       (uint64_t)(uintptr_t)t + 128, ql_mr_rkey(mr),
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(t + 128, pr->a.buf, 256);
	assert_true(all_zero(t, 128));
	assert_int_equal(ql_mr_dereg(mr), 0);
	assert_int_equal(ql_pd_mem_free(pr->b.pd, t), 0);
}

/* ---- a peer process writes into soft+shm PD memory ----------------------- */

static int write_line(int fd, const struct ql_conn_params *p)
{
	char buf[512];
	int n = ql_conn_params_format(p, buf, sizeof(buf) - 1);

	if (n < 0 || n >= (int)sizeof(buf) - 1)
		return -EINVAL;
	buf[n++] = '\n';
	return write(fd, buf, (size_t)n) == n ? 0 : -EIO;
}

static int read_line(int fd, struct ql_conn_params *p)
{
	char buf[512];
	size_t n = 0;

	while (n < sizeof(buf) - 1 && read(fd, &buf[n], 1) == 1 && buf[n] != '\n')
		n++;
	buf[n] = '\0';
	return ql_conn_params_parse(buf, p);
}

struct node {
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *cq;
	struct ql_qp *qp;
	uint8_t *mem;
	struct ql_mr *mr;
	struct ql_conn_params local;
};

static int node_open(struct node *n)
{
	struct ql_qp_init_attr ia;
	int ret;

	memset(n, 0, sizeof(*n));
	ret = open_named("soft+shm", &n->dev);
	if (!ret)
		ret = ql_pd_alloc(n->dev, &n->pd);
	if (!ret)
		ret = ql_pd_mem_alloc(n->pd, 2 * PAGE, (void **)&n->mem);
	if (!ret)
		ret = ql_mr_reg(n->pd, n->mem, 2 * PAGE, VT_ACCESS_ALL, &n->mr);
	if (!ret)
		ret = ql_cq_create(n->dev, 16, &n->cq);
	if (ret)
		return ret;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = n->cq;
	ia.recv_cq = n->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ret = ql_qp_create(n->pd, &ia, &n->qp);
	if (!ret)
		ret = ql_qp_local_params(n->qp, &n->local);
	n->local.vaddr = (uint64_t)(uintptr_t)n->mem;
	n->local.rkey = ql_mr_rkey(n->mr);
	n->local.length = 2 * PAGE;
	return ret;
}

static void node_close(struct node *n)
{
	assert_int_equal(ql_qp_destroy(n->qp), 0);
	assert_int_equal(ql_cq_destroy(n->cq), 0);
	assert_int_equal(ql_mr_dereg(n->mr), 0);
	assert_int_equal(ql_pd_mem_free(n->pd, n->mem), 0);
	assert_int_equal(ql_pd_free(n->pd), 0);
	assert_int_equal(ql_device_close(n->dev), 0);
}

/* The child: write a pattern from its own PD memory into the parent's. */
static int child_main(int rfd, int wfd)
{
	struct ql_conn_params remote;
	struct ibv_wc wc;
	struct node n;

	if (node_open(&n) || write_line(wfd, &n.local) || read_line(rfd, &remote))
		return 10;
	if (ql_qp_connect(n.qp, &remote, NULL))
		return 11;
	for (int i = 0; i < 1000; i++)
		n.mem[i] = (uint8_t)(i * 7 + 1);
	if (vt_post_write(n.qp, 1, n.mem, 1000, ql_mr_lkey(n.mr), remote.vaddr + PAGE, remote.rkey,
			  IBV_SEND_SIGNALED))
		return 12;
	if (vt_poll_one(n.cq, &wc, VT_TIMEOUT_MS) != 1)
		return 13;
	if (wc.status != IBV_WC_SUCCESS)
		return 20 + (int)wc.status;
	/* tell the parent the WRITE completed, then wait for it to look */
	if (write(wfd, "done\n", 5) != 5 || read(rfd, &wc, 1) < 0)
		return 14;
	return 0;
}

static void test_shm_pd_mem_peer_process(void **state)
{
	struct ql_conn_params remote;
	int to_child[2], to_parent[2], status;
	struct node n;
	char done[5];
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(to_parent), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		_exit(child_main(to_child[0], to_parent[1]));
	}
	close(to_child[0]);
	close(to_parent[1]);
	assert_int_equal(node_open(&n), 0);
	assert_int_equal(read_line(to_parent[0], &remote), 0);
	assert_int_equal(write_line(to_child[1], &n.local), 0);
	assert_int_equal(ql_qp_connect(n.qp, &remote, NULL), 0);
	assert_int_equal(read(to_parent[0], done, 5), 5);
	assert_memory_equal(done, "done\n", 5);
	/* the bytes are here, where they were written, and nowhere else */
	assert_true(all_zero(n.mem, PAGE));
	for (int i = 0; i < 1000; i++)
		assert_int_equal(n.mem[PAGE + i], (uint8_t)(i * 7 + 1));
	assert_true(all_zero(n.mem + PAGE + 1000, PAGE - 1000));
	close(to_child[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(to_parent[0]);
	node_close(&n);
}

int main(void)
{
	const struct CMUnitTest once[] = {
		cmocka_unit_test(test_scheme_each_provider),
		cmocka_unit_test(test_scheme_reserved),
		cmocka_unit_test(test_scheme_unknown),
		cmocka_unit_test(test_device_list),
		cmocka_unit_test(test_close_busy_counts),
		cmocka_unit_test(test_scope_loop_vs_shm),
		cmocka_unit_test(test_shm_pd_mem_peer_process),
	};
	const struct CMUnitTest per_uri[] = {
		cmocka_unit_test(test_pd_mem_alloc),
		cmocka_unit_test(test_pd_mem_errors),
		cmocka_unit_test(test_pd_mem_lifetime),
		cmocka_unit_test_setup_teardown(test_pd_mem_rdma_write, vt_setup_rc, vt_teardown),
	};
	int failed = 0;

	if (vt_soft_enabled())
		failed += cmocka_run_group_tests_name("registry", once, NULL, NULL);
	failed += VT_RUN_PER_URI(per_uri);
	return failed;
}
