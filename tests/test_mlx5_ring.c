/* SPDX-License-Identifier: MIT */
/*
 * qlink/mlx5.h with a concurrent consumer: a "device" thread plays the NIC
 * (it reads the doorbell record, checks each WQE it finds there, writes a
 * CQE with the pass's owner bit once the consumer index leaves room) while
 * the test thread posts RDMA WRITE inline WQEs of 1 or 2 basic blocks,
 * rings, polls and completes. Small rings (8 basic blocks, 4 CQEs) make
 * every WQE size meet the ring's end over and over and the CQ's owner bit
 * flip as often; the counts start just short of their 16-bit (WQE index) and
 * 24-bit (CQ consumer index) wraps. What it proves, at run time and across threads: no
 * WQE is seen before its doorbell record or seen torn, the control
 * segment's index and size match where the device finds it, inline data
 * split by the ring's end is whole, CQEs are read once each and in order,
 * completion frees exactly the posted blocks (no -ENOMEM with room, no
 * overwrite of an unconsumed WQE). And the post/ring/poll loop allocates
 * nothing, takes no lock (interposition) and makes no system call (seccomp).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hotpath.h"
#include "qlink/mlx5.h"

#define SQ_BBS 16
#define CQES 8
/* counts start short of their wrap: the 16-bit WQE index and the 24-bit
 * consumer index both wrap early in the run */
#define SQ_START 0xff00u
#define CQ_START 0xfffff0u
#define QPN 0x123456u
#define COUNT 20000u
#define STRICT_COUNT 1000u /* under seccomp: no yielding, keep it short */

struct ring {
	_Alignas(4096) uint8_t sq[SQ_BBS * 64];
	_Alignas(4096) uint8_t cq[CQES * 64];
	_Alignas(64) uint32_t qp_dbrec[2];
	_Alignas(64) uint32_t cq_dbrec[2];
	_Alignas(64) uint64_t db;
	struct ql_mlx5_qp qp;
	struct ql_mlx5_cq c;
	pthread_t dev;
	_Atomic int stop;
	_Atomic int dev_error; /* 0, or the line of the check that failed */
	uint32_t dev_seen;
};

static struct ring R;

static uint32_t len_of(uint32_t k)
{
	return 8 + (k * 7) % 41; /* 8..48: 1 or 2 basic blocks */
}

static uint8_t byte_of(uint32_t k, uint32_t i)
{
	return (uint8_t)(k * 31 + i);
}

#define DEV_CHECK(cond)                                       \
	do {                                                  \
		if (!(cond)) {                                \
			atomic_store(&R.dev_error, __LINE__); \
			return NULL;                          \
		}                                             \
	} while (0)

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The NIC: consumes WQEs up to the doorbell record, writes CQEs. */
static void *device(void *arg)
{
	uint32_t ci = SQ_START, pi = CQ_START, k = 0; /* WQE consumer (BBs), CQE producer */

	(void)arg;
	while (!atomic_load_explicit(&R.stop, memory_order_relaxed)) {
		uint32_t rec = __atomic_load_n(&R.qp_dbrec[QL_MLX5_SND_DBR], __ATOMIC_ACQUIRE);
		uint32_t head = ql_mlx5_be32toh(rec) & 0xffff;

		while ((ci & 0xffff) != head) {
			const uint8_t *w = R.sq + (ci % SQ_BBS) * 64;
			uint32_t len = len_of(k), ds = 2 + ql_mlx5_inline_ds(len), nbb;

			DEV_CHECK(be32(w) == ((ci & 0xffff) << 8 | QL_MLX5_OPCODE_RDMA_WRITE));
			DEV_CHECK(be32(w + 4) == (QPN << 8 | ds));
			DEV_CHECK(w[11] == QL_MLX5_WQE_CTRL_CQ_UPDATE);
			DEV_CHECK(be32(w + 16) == 0 && be32(w + 20) == 0x1000u + k &&
				  be32(w + 24) == 0x77);
			DEV_CHECK(be32(w + 32) == (len | QL_MLX5_INLINE_SEG));
			for (uint32_t i = 0; i < len; i++) {
				uint32_t off = ((ci % SQ_BBS) * 64 + 36 + i) % sizeof(R.sq);

				DEV_CHECK(R.sq[off] == byte_of(k, i));
			}
			nbb = (ds * 16 + 63) / 64;
			/* room in the CQ: the consumer index given back */
			while (((pi - ql_mlx5_be32toh(
					      __atomic_load_n(&R.cq_dbrec[0], __ATOMIC_ACQUIRE))) &
				0xffffff) >= CQES) {
				if (atomic_load_explicit(&R.stop, memory_order_relaxed))
					return NULL;
				sched_yield();
			}
			{
				uint8_t *e = R.cq + (pi % CQES) * 64;

				memset(e, 0, 63);
				e[56] = QL_MLX5_OPCODE_RDMA_WRITE;
				e[57] = (uint8_t)(QPN >> 16);
				e[58] = (uint8_t)(QPN >> 8);
				e[59] = (uint8_t)QPN;
				e[60] = (uint8_t)(ci >> 8);
				e[61] = (uint8_t)ci;
				__atomic_store_n(
					&e[63], (uint8_t)(QL_MLX5_CQE_REQ << 4 | ((pi / CQES) & 1)),
					__ATOMIC_RELEASE);
			}
			pi++;
			ci += nbb;
			k++;
		}
		R.dev_seen = k;
		sched_yield(); /* 2 cores shared with builds: let the producer run */
	}
	return NULL;
}

static int start(void *arg)
{
	(void)arg;
	memset(&R, 0, sizeof(R));
	for (int i = 0; i < CQES; i++)
		R.cq[i * 64 + 63] = 0xf0;
	R.qp.qpn = QPN;
	R.qp.sq.buf = R.sq;
	R.qp.sq.wqe_cnt = SQ_BBS;
	R.qp.sq.stride = 64;
	R.qp.sq.dbrec = &R.qp_dbrec[QL_MLX5_SND_DBR];
	R.qp.bf_reg = &R.db;
	R.c.buf = R.cq;
	R.c.cqe_cnt = CQES;
	R.c.cqe_size = 64;
	R.qp.sq.head = R.qp.sq.tail = SQ_START;
	R.qp_dbrec[QL_MLX5_SND_DBR] = ql_mlx5_htobe32(SQ_START & 0xffff); /* nothing posted */
	R.c.cons_index = CQ_START;
	R.cq_dbrec[0] = ql_mlx5_htobe32(CQ_START);
	R.c.dbrec = R.cq_dbrec;
	return pthread_create(&R.dev, NULL, device, NULL) ? -1 : 0;
}

static void stop(void)
{
	atomic_store(&R.stop, 1);
	pthread_join(R.dev, NULL);
}

struct run {
	uint32_t count;
	bool yield; /* not under seccomp */
};

/* Post count WQEs, keeping the ring as full as it goes; every CQE checked. */
static int produce(void *arg)
{
	const struct run *run = arg;
	uint8_t data[48];
	uint32_t posted = 0, done = 0;
	uint16_t expect_counter = (uint16_t)SQ_START;
	struct ql_mlx5_cqe_info ci = { 0 };

	while (done < run->count) {
		void *ctrl = NULL;
		int n = 0;

		while (posted < run->count) {
			uint32_t len = len_of(posted);
			int r;

			for (uint32_t i = 0; i < len; i++)
				data[i] = byte_of(posted, i);
			r = ql_mlx5_sq_post_write_inline(&R.qp, data, len, 0x1000u + posted, 0x77,
							 QL_MLX5_WQE_CTRL_CQ_UPDATE, &ctrl);
			if (r == -ENOMEM)
				break;
			if (r)
				return 1;
			posted++;
			n++;
		}
		if (n)
			ql_mlx5_sq_doorbell(&R.qp, ctrl);
		while (ql_mlx5_cq_poll(&R.c, &ci) == 1) {
			if (ci.wqe_counter != expect_counter || ci.qpn != QPN ||
			    ci.send_opcode != QL_MLX5_OPCODE_RDMA_WRITE)
				return 2;
			ql_mlx5_sq_complete(&R.qp, ci.wqe_counter);
			expect_counter = (uint16_t)R.qp.sq.tail;
			done++;
		}
		if (atomic_load_explicit(&R.dev_error, memory_order_relaxed))
			return 3;
		if (run->yield && !n)
			sched_yield();
	}
	return R.qp.sq.head == R.qp.sq.tail ? 0 : 4;
}

static void test_device_thread(void **state)
{
	struct run run = { COUNT, true };
	unsigned long allocs = 0, locks = 0;
	int r;

	(void)state;
	assert_int_equal(start(NULL), 0);
	if (hp_available())
		hp_begin();
	r = produce(&run);
	if (hp_available())
		hp_end(&allocs, &locks);
	stop();
	if (R.dev_error)
		fail_msg("device check failed at line %d (WQE %u)", R.dev_error, R.dev_seen);
	assert_int_equal(r, 0);
	assert_int_equal(R.dev_seen, COUNT);
	assert_int_equal(R.qp.sq.head, R.qp.sq.tail);
	assert_int_equal(allocs, 0);
	assert_int_equal(locks, 0);
	/* the 16-bit WQE index and the 24-bit consumer index wrapped */
	assert_true(R.qp.sq.head > 0x10000);
	assert_true(R.c.cons_index > 0x1000000);
	assert_true(ql_mlx5_be32toh(R.cq_dbrec[0]) == (R.c.cons_index & 0xffffff));
}

static void test_no_syscalls(void **state)
{
	struct run run = { STRICT_COUNT, false };
	char why[256] = "";

	(void)state;
	if (hp_run_strict(start, produce, &run, why, sizeof(why)))
		fail_msg("%s", why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device_thread),
		cmocka_unit_test(test_no_syscalls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
