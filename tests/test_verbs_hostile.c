/* SPDX-License-Identifier: MIT */
/*
 * soft+shm against a hostile peer: a fork()ed child plays a connected peer
 * that attacks with raw access to its own shared memory (and to ours, which
 * it maps like any peer): it tries to shrink its heap and liveness memfds,
 * presents unsealed or foreign descriptors in its GID, rewrites its MR
 * table, its receive-queue geometry and descriptors, and the completion
 * words and queue indices of our own receive queue. Each attack must be
 * repelled: no SIGBUS, no write outside the mapping (a canary in private
 * memory next to nothing the peer may reach stays intact), the victim's QP
 * gets the IB error the violation maps to, and every refusal to connect
 * reads the same (docs/soft-provider.md, "Trust").
 *
 * The child knows the provider's shared layout (src/providers/soft/soft.h), as an
 * attacker who read the source would.
 */
#define _GNU_SOURCE
#include "verbs_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "providers/soft/soft.h"

#define BUF_LEN (64 * 1024)
#define CANARY_LEN 4096
#define CANARY_BYTE 0xc5
#define MAX_QPS 16
/* How much of its real heap the peer copies into a forged, unsealed one:
 * header and device blocks, so that only the seal check can refuse it. */
#define FAKE_COPY (8 << 20)

/* One message each way over a SOCK_SEQPACKET pair. */
struct msg {
	char cmd[16];
	uint64_t a, b, c;
	int32_t ret;
	struct ql_conn_params p;
};

static int node_open(struct vt_node *n)
{
	char uri[QL_DEVICE_URI_MAX];
	static unsigned int seq;
	struct ql_device *dev;
	int ret;

	memset(n, 0, sizeof(*n));
	snprintf(uri, sizeof(uri), "soft+shm://hostile-%d-%u", (int)getpid(), seq++);
	ret = ql_device_open(uri, &dev);
	return ret ? ret : vt_node_open(n, dev, BUF_LEN);
}

static int qpx_create(struct vt_node *n, struct vt_node_qp *q)
{
	return vt_node_qp_create(n, q, 64, 16, 0);
}

static int msg_send(int fd, const struct msg *m)
{
	return write(fd, m, sizeof(*m)) == (ssize_t)sizeof(*m) ? 0 : -EIO;
}

static int msg_recv(int fd, struct msg *m)
{
	return read(fd, m, sizeof(*m)) == (ssize_t)sizeof(*m) ? 0 : -EIO;
}

/* ---- the hostile peer --------------------------------------------------- */

static uint32_t gid_u32(const struct ql_conn_params *p, int at)
{
	uint32_t v;

	memcpy(&v, p->gid.raw + at, 4);
	return ntohl(v);
}

static void gid_set_u32(struct ql_conn_params *p, int at, uint32_t v)
{
	v = htonl(v);
	memcpy(p->gid.raw + at, &v, 4);
}

/* Map the heap a GID names (ours or the victim's) with no checks at all. */
static uint8_t *raw_map(const struct ql_conn_params *p, size_t *size)
{
	char path[64];
	struct stat st;
	void *m;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/fd/%u", gid_u32(p, 4), gid_u32(p, 8));
	fd = open(path, O_RDWR);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return NULL;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd,
		 0);
	close(fd);
	*size = (size_t)st.st_size;
	return m == MAP_FAILED ? NULL : m;
}

/* The device block of the device a GID names, in a raw mapping. */
static struct soft_dev_shared *raw_dev(uint8_t *map, const struct ql_conn_params *p)
{
	struct soft_heap_hdr *hdr = (struct soft_heap_hdr *)map;
	uint32_t id = gid_u32(p, 12);

	for (int i = 0; i < SOFT_MAX_DEVS_PER_HEAP; i++)
		if (hdr->dev_id[i] == id)
			return (struct soft_dev_shared *)(map + hdr->dev_off[i]);
	return NULL;
}

static int hostile(int fd)
{
	struct vt_node n;
	struct vt_node_qp q[MAX_QPS];
	struct soft_device *sd;
	struct soft_mr_entry *me;
	int nq = 0;

	if (node_open(&n))
		return 10;
	sd = (struct soft_device *)n.dev;
	me = &sd->sh->mr[ql_mr_rkey(n.mr) & (SOFT_MAX_MR - 1)];
	for (;;) {
		struct msg m, r;

		if (msg_recv(fd, &m))
			return 11;
		memset(&r, 0, sizeof(r));
		snprintf(r.cmd, sizeof(r.cmd), "ok");
		if (!strcmp(m.cmd, "bye")) {
			msg_send(fd, &r);
			break;
		} else if (!strcmp(m.cmd, "qp")) {
			/* a fresh QP; with a != 0, its receive-queue geometry
			 * is garbage before the victim connects */
			if (nq == MAX_QPS || qpx_create(&n, &q[nq]))
				return 12;
			if (m.a) {
				struct soft_qp_shared *sh = ((struct soft_qp *)q[nq].qp)->sh;

				sh->rq_mask = 0xffffffffu;
				sh->rq_slot_size = 0x40000000u;
			}
			r.p = q[nq].local;
			r.a = (uint64_t)nq;
			msg_send(fd, &r);
			if (msg_recv(fd, &m))
				return 13;
			q[nq].remote = m.p;
			r.ret = ql_qp_connect(q[nq].qp, &q[nq].remote, NULL);
			nq++;
		} else if (!strcmp(m.cmd, "mr")) {
			/* our MR table entry says whatever we like */
			me->addr = m.a;
			me->length = m.b;
		} else if (!strcmp(m.cmd, "trunc")) {
			/* shrink (and grow) our heap and liveness memfds */
			int hfd = (int)gid_u32(&q[0].local, 8);
			size_t sz;
			uint8_t *map = raw_map(&q[0].local, &sz);
			int lfd = map ? ((struct soft_heap_hdr *)map)->live_fd : -1;

			r.a = ftruncate(hfd, 4096) < 0 ? (uint64_t)errno : 0;
			r.b = ftruncate(lfd, 0) < 0 ? (uint64_t)errno : 0;
			r.c = ftruncate(hfd, (off_t)sz * 2) < 0 ? (uint64_t)errno : 0;
			r.ret = fcntl(hfd, F_ADD_SEALS, F_SEAL_WRITE) < 0 ? errno : 0;
			if (map)
				munmap(map, sz);
		} else if (!strcmp(m.cmd, "fds")) {
			/* descriptors to name in a forged GID: an unsealed
			 * memfd holding a copy of our heap's start, a sealed
			 * memfd that is no heap, a pipe */
			int u = memfd_create("fake-heap", MFD_ALLOW_SEALING);
			int s = memfd_create("sealed", MFD_ALLOW_SEALING);
			int pp[2];
			size_t sz;
			uint8_t *map = raw_map(&q[0].local, &sz);

			if (u < 0 || s < 0 || !map || pipe(pp) < 0 || ftruncate(u, (off_t)sz) < 0 ||
			    pwrite(u, map, FAKE_COPY, 0) != FAKE_COPY ||
			    ftruncate(s, 1 << 20) < 0 ||
			    fcntl(s, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
				return 14;
			munmap(map, sz);
			r.a = (uint64_t)u;
			r.b = (uint64_t)s;
			r.c = (uint64_t)pp[0];
		} else if (!strcmp(m.cmd, "rqgeo")) {
			/* rewrite the geometry of QP a's receive queue after
			 * the victim connected, with a real receive posted */
			struct soft_qp *sq = (struct soft_qp *)q[m.a].qp;

			r.ret = vt_post_recv(q[m.a].qp, 7, n.buf, 256, ql_mr_lkey(n.mr));
			sq->sh->rq_mask = 0xffffffffu;
			sq->sh->rq_slot_size = 0x40000000u;
			sq->sh->rq_off = m.b;
			sq->sh->max_recv_sge = 1000;
		} else if (!strcmp(m.cmd, "recvsge")) {
			/* post a receive, then point its SGE at addr b, or
			 * give it c SGEs */
			struct soft_qp *sq = (struct soft_qp *)q[m.a].qp;
			struct soft_rq_slot *sl;

			r.ret = vt_post_recv(q[m.a].qp, 8, n.buf, 256, ql_mr_lkey(n.mr));
			sl = soft_rq_slot(sq->rq, sq->rq_slot_size, sq->rq_slots - 1,
					  sq->rq_pi - 1);
			if (m.c)
				sl->num_sge = (uint32_t)m.c;
			else
				sl->sge[0].addr = m.b;
		} else if (!strcmp(m.cmd, "victim")) {
			/* the victim's own memory: its QP (of our QP a), its
			 * receive slots and queue indices, its MR table entry
			 * of lkey b */
			size_t sz;
			uint8_t *map = raw_map(&q[m.a].remote, &sz);
			struct soft_dev_shared *vd = map ? raw_dev(map, &q[m.a].remote) : NULL;
			struct soft_qp_shared *vq;
			struct soft_mr_entry *ve;
			uint32_t ssz;

			if (!vd)
				return 15;
			vq = &vd->qp[q[m.a].remote.qpn & (SOFT_MAX_QP - 1)];
			ve = &vd->mr[m.b & (SOFT_MAX_MR - 1)];
			ssz = vq->rq_slot_size;
			/* completion words on slot 0 (posted, with a length far
			 * beyond its buffer) and slots 1..3 (never posted) */
			for (uint32_t i = 0; i < 4; i++) {
				struct soft_rq_slot *sl =
					(struct soft_rq_slot *)(map + vq->rq_off + i * ssz);

				sl->status = IBV_WC_SUCCESS;
				sl->opcode = IBV_WC_RECV;
				sl->byte_len = 0x7fffffff;
				sl->num_sge = 1000;
				atomic_store(&sl->done, i + 1);
			}
			/* its queue indices and geometry */
			vq->rq_mask = 0xffffffffu;
			vq->rq_slot_size = 0x7fffffc0u;
			atomic_store(&vq->rq_tail, 1ull << 40);
			atomic_store(&vq->rq_head, 1ull << 41);
			/* its MR table: the whole address space */
			ve->addr = 0;
			ve->length = UINT64_MAX;
			munmap(map, sz);
		} else {
			return 16;
		}
		msg_send(fd, &r);
	}
	for (int i = 0; i < nq; i++)
		vt_node_qp_destroy(&q[i]);
	vt_node_close(&n);
	return 0;
}

/* ---- the victim ------------------------------------------------------- */

static pid_t child = -1;
static int sock = -1;
static struct vt_node vn;
static uint8_t *canary;

static int setup(void **state)
{
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	fflush(NULL);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(sv[0]);
		alarm(60);
		_exit(hostile(sv[1]));
	}
	close(sv[1]);
	sock = sv[0];
	assert_int_equal(node_open(&vn), 0);
	/* private memory: no peer may ever reach it */
	canary = malloc(3 * CANARY_LEN);
	assert_non_null(canary);
	memset(canary, CANARY_BYTE, 3 * CANARY_LEN);
	return 0;
}

static bool canary_intact(void)
{
	for (size_t i = 0; i < 3 * CANARY_LEN; i++)
		if (canary[i] != CANARY_BYTE)
			return false;
	return true;
}

static int teardown(void **state)
{
	struct msg m = { .cmd = "bye" };
	int st = 0;

	(void)state;
	if (msg_send(sock, &m) == 0)
		msg_recv(sock, &m);
	assert_int_equal(waitpid(child, &st, 0), child);
	close(sock);
	assert_true(canary_intact());
	free(canary);
	vt_node_close(&vn);
	/* the peer did not crash either (its exit code says what failed) */
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	return 0;
}

static struct msg call(const char *cmd, uint64_t a, uint64_t b, uint64_t c)
{
	struct msg m = { .a = a, .b = b, .c = c }, r;

	snprintf(m.cmd, sizeof(m.cmd), "%s", cmd);
	assert_int_equal(msg_send(sock, &m), 0);
	assert_int_equal(msg_recv(sock, &r), 0);
	assert_string_equal(r.cmd, "ok");
	return r;
}

/* A connected pair: our QP q and the peer's QP number *idx. */
static void pair(struct vt_node_qp *q, bool bad_geometry, uint64_t *idx)
{
	struct msg m = { .cmd = "qp", .a = bad_geometry }, r;

	assert_int_equal(qpx_create(&vn, q), 0);
	assert_int_equal(msg_send(sock, &m), 0);
	assert_int_equal(msg_recv(sock, &r), 0);
	q->remote = r.p;
	*idx = r.a;
	m.p = q->local;
	assert_int_equal(msg_send(sock, &m), 0);
	assert_int_equal(msg_recv(sock, &r), 0);
	assert_int_equal(r.ret, 0);
	assert_int_equal(ql_qp_connect(q->qp, &q->remote, NULL), 0);
}

/* The peer address whose local image is p (what an attacker who learned
 * our layout would aim at). */
static uint64_t aim(const struct vt_node_qp *q, const void *p)
{
	return (uint64_t)(uintptr_t)p - (uint64_t)((struct soft_qp *)q->qp)->peer_delta;
}

static void expect_error(struct vt_node_qp *q, uint64_t id, enum ibv_wc_status st)
{
	struct ibv_wc wc;

	vt_expect_wc(q->scq, &wc, id, st, -1);
	assert_int_equal(ql_qp_state(q->qp), IBV_QPS_ERR);
	assert_true(canary_intact());
}

/* ---- 1. memory a peer could resize ------------------------------------ */

static void test_peer_cannot_shrink(void **state)
{
	struct vt_node_qp q;
	struct ibv_wc wc;
	struct msg r;
	uint64_t k;

	(void)state;
	pair(&q, false, &k);
	r = call("trunc", 0, 0, 0);
	assert_int_equal(r.a, EPERM);	/* heap: F_SEAL_SHRINK */
	assert_int_equal(r.b, EPERM);	/* liveness page */
	assert_int_equal(r.c, EPERM);	/* heap: F_SEAL_GROW */
	assert_int_equal(r.ret, EPERM); /* F_SEAL_SEAL: no more seals */
	/* and we touch its memory at the far end: no SIGBUS */
	memset(vn.buf, 0x42, 64);
	assert_int_equal(vt_post_write(q.qp, 1, vn.buf, 64, ql_mr_lkey(vn.mr),
				       q.remote.vaddr + BUF_LEN - 64, q.remote.rkey,
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(q.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(vt_post_read(q.qp, 2, vn.buf + 128, 64, ql_mr_lkey(vn.mr),
				      q.remote.vaddr + BUF_LEN - 64, q.remote.rkey,
				      IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(q.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_memory_equal(vn.buf, vn.buf + 128, 64);
	vt_node_qp_destroy(&q);
}

/* Shared-memory mappings of this process (memfds show as "/memfd:"). */
static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "/memfd:") != NULL;
	fclose(f);
	return n;
}

/* Forged GIDs: every refusal is the same errno and the same text, and
 * nothing gets mapped. */
static void test_forged_gid_refused_alike(void **state)
{
	struct vt_node_qp q, mine;
	struct msg r;
	uint64_t k;
	pid_t gone;
	char first[512] = "";
	struct {
		const char *what;
		uint32_t pid, fd, id;
	} v[8];
	int nv = 0, maps;

	(void)state;
	pair(&q, false, &k);
	r = call("fds", 0, 0, 0);
	gone = fork();
	if (gone == 0)
		_exit(0);
	assert_int_equal(waitpid(gone, NULL, 0), gone);
	{
		uint32_t pid = gid_u32(&q.remote, 4), fd = gid_u32(&q.remote, 8),
			 id = gid_u32(&q.remote, 12);

		v[nv++] = (typeof(v[0])){ "unsealed memfd with a heap header", pid, (uint32_t)r.a,
					  id };
		v[nv++] = (typeof(v[0])){ "sealed memfd that is no heap", pid, (uint32_t)r.b, id };
		v[nv++] = (typeof(v[0])){ "a pipe", pid, (uint32_t)r.c, id };
		v[nv++] = (typeof(v[0])){ "an fd that is not open", pid, 1000, id };
		v[nv++] = (typeof(v[0])){ "a pid that does not exist", (uint32_t)gone, fd, id };
		v[nv++] = (typeof(v[0])){ "a device id the peer lacks", pid, fd, id ^ 0x5a5a5a5a };
		v[nv++] = (typeof(v[0])){ "init's stdin", 1, 0, id };
	}
	assert_int_equal(qpx_create(&vn, &mine), 0);
	maps = count_maps();
	for (int i = 0; i < nv; i++) {
		struct ql_conn_params p = q.remote;
		int ret;

		gid_set_u32(&p, 4, v[i].pid);
		gid_set_u32(&p, 8, v[i].fd);
		gid_set_u32(&p, 12, v[i].id);
		assert_int_equal(vt_modify_state(mine.qp, IBV_QPS_RESET), 0);
		ret = ql_qp_connect(mine.qp, &p, NULL);
		if (ret != -EHOSTUNREACH)
			print_error("%s: %d (%s)\n", v[i].what, ret, ql_error_detail());
		assert_int_equal(ret, -EHOSTUNREACH);
		if (!first[0])
			snprintf(first, sizeof(first), "%s", ql_error_detail());
		if (strcmp(first, ql_error_detail()))
			print_error("%s: '%s' differs from '%s'\n", v[i].what, ql_error_detail(),
				    first);
		assert_string_equal(first, ql_error_detail());
		/* no pid, fd number or path in the text */
		assert_null(strstr(first, "/proc"));
		assert_null(strpbrk(first, "0123456789"));
		assert_int_equal(count_maps(), maps);
	}
	vt_node_qp_destroy(&mine);
	vt_node_qp_destroy(&q);
}

/* ---- 2. the peer's MR table ------------------------------------------- */

static void test_mr_table_rewritten(void **state)
{
	struct vt_node_qp q;
	uint64_t k, t;
	uint8_t before[64];

	(void)state;
	/* (a) addr 0, length the whole address space: WRITE into our canary */
	pair(&q, false, &k);
	call("mr", 0, UINT64_MAX, 0);
	assert_int_equal(vt_post_write(q.qp, 1, vn.buf, 64, ql_mr_lkey(vn.mr),
				       aim(&q, canary + CANARY_LEN), q.remote.rkey,
				       IBV_SEND_SIGNALED),
			 0);
	expect_error(&q, 1, IBV_WC_REM_ACCESS_ERR);
	vt_node_qp_destroy(&q);

	/* (b) a READ of our private memory (an information leak) */
	pair(&q, false, &k);
	memcpy(before, vn.buf, 64);
	assert_int_equal(vt_post_read(q.qp, 2, vn.buf, 64, ql_mr_lkey(vn.mr),
				      aim(&q, canary + CANARY_LEN), q.remote.rkey,
				      IBV_SEND_SIGNALED),
			 0);
	expect_error(&q, 2, IBV_WC_REM_ACCESS_ERR);
	assert_memory_equal(before, vn.buf, 64);
	vt_node_qp_destroy(&q);

	/* (c) an atomic on it */
	pair(&q, false, &k);
	assert_int_equal(vt_post_atomic(q.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 3, vn.buf,
					ql_mr_lkey(vn.mr), aim(&q, canary + CANARY_LEN),
					q.remote.rkey, 1, 0, IBV_SEND_SIGNALED),
			 0);
	expect_error(&q, 3, IBV_WC_REM_ACCESS_ERR);
	vt_node_qp_destroy(&q);

	/* (d) an entry starting at the canary whose length wraps */
	pair(&q, false, &k);
	t = aim(&q, canary + CANARY_LEN);
	call("mr", t, UINT64_MAX - t + 1, 0);
	assert_int_equal(vt_post_write(q.qp, 4, vn.buf, 64, ql_mr_lkey(vn.mr), t, q.remote.rkey,
				       IBV_SEND_SIGNALED),
			 0);
	expect_error(&q, 4, IBV_WC_REM_ACCESS_ERR);
	vt_node_qp_destroy(&q);

	/* (e) two SGEs (the slow path, not the one-SGE WRITE fast path) */
	pair(&q, false, &k);
	call("mr", t, UINT64_MAX - t, 0);
	{
		struct ibv_sge sg[2] = { { (uintptr_t)vn.buf, 32, ql_mr_lkey(vn.mr) },
					 { (uintptr_t)vn.buf + 32, 32, ql_mr_lkey(vn.mr) } };
		struct ibv_send_wr wr = { .wr_id = 5,
					  .sg_list = sg,
					  .num_sge = 2,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { t, q.remote.rkey } },
				   *bad;

		assert_int_equal(ql_qp_post_send(q.qp, &wr, &bad), 0);
	}
	expect_error(&q, 5, IBV_WC_REM_ACCESS_ERR);
	vt_node_qp_destroy(&q);
	/* the peer's own QP went to ERR too, nothing else happened to us */
}

/* ---- 2. the peer's receive queue -------------------------------------- */

static void test_recv_descriptors_rewritten(void **state)
{
	struct vt_node_qp q;
	uint64_t k;

	(void)state;
	/* (a) an SGE pointing at our canary, its MR covering everything */
	pair(&q, false, &k);
	call("mr", 0, UINT64_MAX, 0);
	call("recvsge", k, aim(&q, canary + CANARY_LEN), 0);
	assert_int_equal(vt_post_send(q.qp, 1, vn.buf, 64, ql_mr_lkey(vn.mr), IBV_SEND_SIGNALED),
			 0);
	expect_error(&q, 1, IBV_WC_REM_OP_ERR);
	vt_node_qp_destroy(&q);

	/* (b) a thousand SGEs in a slot that holds two */
	pair(&q, false, &k);
	call("recvsge", k, 0, 1000);
	assert_int_equal(vt_post_send(q.qp, 2, vn.buf, 64, ql_mr_lkey(vn.mr), IBV_SEND_SIGNALED),
			 0);
	expect_error(&q, 2, IBV_WC_REM_OP_ERR);
	vt_node_qp_destroy(&q);
}

static void test_rq_geometry_rewritten(void **state)
{
	struct vt_node_qp q;
	struct ibv_wc wc;
	uint64_t k;

	(void)state;
	/* (a) after we connected: mask, slot size, offset and SGE count
	 * rewritten to aim at our canary. We use what we validated when
	 * connecting, so the SEND lands in the receive it posted. */
	pair(&q, false, &k);
	call("rqgeo", k, aim(&q, canary) - ((struct soft_qp *)q.qp)->peer_lo, 0);
	assert_int_equal(vt_post_send(q.qp, 1, vn.buf, 64, ql_mr_lkey(vn.mr), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(q.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_true(canary_intact());
	vt_node_qp_destroy(&q);

	/* (b) garbage before we connected: the queue is unusable, a SEND is
	 * the responder's operational error */
	pair(&q, true, &k);
	assert_int_equal(vt_post_send(q.qp, 2, vn.buf, 64, ql_mr_lkey(vn.mr), IBV_SEND_SIGNALED),
			 0);
	expect_error(&q, 2, IBV_WC_REM_OP_ERR);
	vt_node_qp_destroy(&q);
}

/* ---- 2. our own receive queue and MR table, written by the peer ------- */

static void test_own_memory_rewritten(void **state)
{
	struct vt_node_qp q, q2, q3;
	struct ibv_wc wc[8];
	uint64_t k, k2, k3;
	int n;

	(void)state;
	pair(&q, false, &k);
	pair(&q2, false, &k2);
	pair(&q3, false, &k3);
	assert_int_equal(vt_post_recv(q.qp, 77, vn.buf, 64, ql_mr_lkey(vn.mr)), 0);
	call("victim", k, ql_mr_lkey(vn.mr), 0);

	/* our MR table in the heap says "everything": our own check must
	 * not believe it (LOC_PROT_ERR for a local SGE on the canary) */
	assert_int_equal(vt_post_write(q2.qp, 1, canary + CANARY_LEN, 64, ql_mr_lkey(vn.mr),
				       q2.remote.vaddr, q2.remote.rkey, IBV_SEND_SIGNALED),
			 0);
	expect_error(&q2, 1, IBV_WC_LOC_PROT_ERR);
	/* and a READ into the canary */
	assert_int_equal(vt_post_read(q3.qp, 2, canary + CANARY_LEN, 64, ql_mr_lkey(vn.mr),
				      q3.remote.vaddr, q3.remote.rkey, IBV_SEND_SIGNALED),
			 0);
	expect_error(&q3, 2, IBV_WC_LOC_PROT_ERR);

	/* one completion, for the one receive we posted, with the peer's
	 * impossible length refused; no phantom completions */
	n = vt_poll_for(q.rcq, wc, 8, 200);
	assert_int_equal(n, 1);
	assert_int_equal(wc[0].wr_id, 77);
	assert_int_equal(wc[0].status, IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(ql_qp_state(q.qp), IBV_QPS_ERR);
	/* more receives are flushed, in our geometry, despite the peer's */
	assert_int_equal(vt_post_recv(q.qp, 78, vn.buf, 64, ql_mr_lkey(vn.mr)), 0);
	n = vt_poll_for(q.rcq, wc, 8, 100);
	assert_int_equal(n, 1);
	assert_int_equal(wc[0].wr_id, 78);
	assert_int_equal(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	/* reset and reuse: the queue is cleared with our own sizes */
	assert_int_equal(vt_modify_state(q.qp, IBV_QPS_RESET), 0);
	assert_true(canary_intact());
	vt_node_qp_destroy(&q3);
	vt_node_qp_destroy(&q2);
	vt_node_qp_destroy(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_peer_cannot_shrink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forged_gid_refused_alike, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mr_table_rewritten, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recv_descriptors_rewritten, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rq_geometry_rewritten, setup, teardown),
		cmocka_unit_test_setup_teardown(test_own_memory_rewritten, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	if (!vt_soft_enabled())
		return 0;
	return cmocka_run_group_tests_name("soft+shm hostile peer", tests, NULL, NULL);
}
