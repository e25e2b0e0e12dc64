/* SPDX-License-Identifier: MIT */
/*
 * The hot path (ql_qp_post_send, ql_qp_post_recv, ql_cq_poll) neither
 * allocates, nor locks, nor enters the kernel (tests/hotpath.h):
 *
 * (a) with the allocator and lock calls interposed and counted, a million
 *     WRITE+poll and a million SEND/RECV operations make none;
 * (b) a forked child sets everything up, then runs post+poll loops under a
 *     seccomp filter that kills it at any system call but read, write,
 *     exit and sigreturn; the parent checks it came back alive.
 *
 * On soft+udp the loops are shorter (5 000 and 1 000 operations) and the
 * proof is about the application's thread: the device's NIC thread (the
 * "hardware") does the socket calls, outside the filter, and its
 * serialisation with setup calls is a private spin flag, not a pthread
 * lock; a post writes the NIC's eventfd (write is allowed) only when the
 * NIC went to sleep. In caller progress mode (docs/progress.md: the default
 * on a host with few cores, QLINK_PROGRESS=caller) there is no NIC thread:
 * the application's post, poll and ql_device_progress run the NIC, so the
 * loops also prove that one round of the NIC allocates and locks nothing,
 * and the filter allows exactly recvmmsg and sendmmsg besides.
 */
#define _GNU_SOURCE
#include "verbs_fixture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/syscall.h>

#include "hotpath.h"
#include "providers/sudp/sudp.h"

#define HP_OPS 1000000
#define HP_SECCOMP_OPS 100000
/* soft+udp: every operation is a round trip through two NIC threads and
 * the kernel's UDP stack (tens of microseconds on a loaded 2-core host) */
#define HP_OPS_UDP 5000
#define HP_SECCOMP_OPS_UDP 1000

/* ---- the loops -------------------------------------------------------- */

/* Spin on one completion without a clock; false if none came. */
static bool spin_one(struct ql_cq *cq, struct ibv_wc *wc)
{
	for (long i = 0; i < 200000000L; i++) {
		int n = ql_cq_poll(cq, 1, wc);

		if (n == 1)
			return wc->status == IBV_WC_SUCCESS;
		if (n < 0)
			return false;
		vt_progress_all(); /* caller progress: the peer's NIC */
	}
	return false;
}

/* n signaled 64-byte WRITEs, each polled. Returns the number that failed. */
static long loop_write(struct vt_pair *pr, long n)
{
	struct ibv_sge sge = { (uintptr_t)pr->a.buf, 64, ql_mr_lkey(pr->a.mr) };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { (uintptr_t)pr->b.buf, ql_mr_rkey(pr->b.mr) },
	}, *bad;
	struct ibv_wc wc;
	long failed = 0;

	for (long i = 0; i < n; i++) {
		wr.wr_id = (uint64_t)i;
		*(uint64_t *)pr->a.buf = (uint64_t)i;
		if (ql_qp_post_send(pr->a.qp, &wr, &bad) || !spin_one(pr->a.scq, &wc) ||
		    wc.wr_id != (uint64_t)i) {
			failed++;
			break;
		}
	}
	if (!failed && *(uint64_t *)pr->b.buf != (uint64_t)(n - 1))
		failed++;
	return failed;
}

/* n SENDs of 32 bytes into n receives. Returns the number that failed. */
static long loop_send_recv(struct vt_pair *pr, long n)
{
	struct ibv_sge ssge = { (uintptr_t)pr->a.buf, 32, ql_mr_lkey(pr->a.mr) };
	struct ibv_sge rsge = { (uintptr_t)pr->b.buf + 4096, 64, ql_mr_lkey(pr->b.mr) };
	struct ibv_send_wr swr = { .sg_list = &ssge,
				   .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED },
			   *sbad;
	struct ibv_recv_wr rwr = { .sg_list = &rsge, .num_sge = 1 }, *rbad;
	struct ibv_wc wc;
	long failed = 0;

	for (long i = 0; i < n; i++) {
		swr.wr_id = (uint64_t)i;
		rwr.wr_id = (uint64_t)i;
		*(uint64_t *)pr->a.buf = (uint64_t)i;
		if (ql_qp_post_recv(pr->b.qp, &rwr, &rbad) ||
		    ql_qp_post_send(pr->a.qp, &swr, &sbad) || !spin_one(pr->a.scq, &wc) ||
		    !spin_one(pr->b.rcq, &wc) || wc.wr_id != (uint64_t)i || wc.byte_len != 32 ||
		    *(uint64_t *)(pr->b.buf + 4096) != (uint64_t)i) {
			failed++;
			break;
		}
	}
	return failed;
}

/* ---- (a) no allocation, no locks -------------------------------------- */

static void test_no_alloc_no_lock(void **state)
{
	const struct vt_param *p = *state;
	void *(*volatile my_malloc)(size_t) = malloc;
	void (*volatile my_free)(void *) = free;
	int (*volatile my_lock)(pthread_mutex_t *) = pthread_mutex_lock;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct vt_opts o = { .type = IBV_QPT_RC };
	unsigned long n_alloc, n_lock;
	struct vt_pair *pr;
	long failed;

	VT_SOFT_ONLY(p, "post and poll with no allocation and no lock (rxe's provider takes a "
			"spin lock per post, by design)");
	if (!hp_available())
		skip(); /* ASan owns malloc */

	/* the counters see calls made while counting, and only then */
	hp_begin();
	my_free(my_malloc(32));
	my_lock(&m);
	hp_end(&n_alloc, &n_lock);
	pthread_mutex_unlock(&m);
	my_free(my_malloc(32));
	assert_int_equal(n_alloc, 2);
	assert_int_equal(n_lock, 1);

	assert_int_equal(vt_pair_create(p, &o, &pr), 0);
	hp_begin();
	failed = loop_write(pr, p->udp ? HP_OPS_UDP : HP_OPS);
	hp_end(&n_alloc, &n_lock);
	assert_int_equal(failed, 0);
	if (n_alloc || n_lock)
		fail_msg("WRITE+poll: %lu allocator calls, %lu lock calls", n_alloc, n_lock);

	hp_begin();
	failed = loop_send_recv(pr, p->udp ? HP_OPS_UDP : HP_OPS);
	hp_end(&n_alloc, &n_lock);
	assert_int_equal(failed, 0);
	if (n_alloc || n_lock)
		fail_msg("SEND/RECV: %lu allocator calls, %lu lock calls", n_alloc, n_lock);
	vt_pair_destroy(pr);
}

/* ---- (b) no system calls ---------------------------------------------- */

struct strict_arg {
	const struct vt_param *p;
	struct vt_pair *pr;
	int extra[2], nextra;
};

static int strict_setup(void *arg)
{
	struct strict_arg *a = arg;
	struct vt_opts o = { .type = IBV_QPT_RC };
	int ret = vt_pair_create(a->p, &o, &a->pr);

	/* soft+udp in caller mode: the NIC's one recvmmsg and one sendmmsg
	 * per round run in this thread, and nothing else may */
	if (!ret && a->p->udp && ((struct sudp_device *)(void *)a->pr->a.dev)->caller) {
		a->extra[0] = SYS_recvmmsg;
		a->extra[1] = SYS_sendmmsg;
		a->nextra = 2;
	}
	return ret;
}

static int strict_loop(void *arg)
{
	struct strict_arg *a = arg;

	long n = a->p->udp ? HP_SECCOMP_OPS_UDP : HP_SECCOMP_OPS;

	return loop_write(a->pr, n) || loop_send_recv(a->pr, n);
}

static void test_no_syscalls(void **state)
{
	struct strict_arg a = { .p = *state };
	char why[200];

	VT_SOFT_ONLY(a.p, "post and poll with no system call (rxe's post_send rings its "
			  "doorbell with a write() to the kernel, by design)");
	if (hp_run_strict_allow(strict_setup, strict_loop, &a, a.extra, &a.nextra, why,
				sizeof(why)))
		fail_msg("%s", why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_alloc_no_lock),
		cmocka_unit_test(test_no_syscalls),
	};

	return VT_RUN_PER_URI(tests) ? 1 : 0;
}
