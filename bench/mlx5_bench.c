/* SPDX-License-Identifier: MIT */
/*
 * qlink-bench-mlx5: the soft NIC's mlx5 queue mode against its verbs API
 * path, on the same two cores (docs/benchmarks.md, "mlx5 queue mode").
 *
 *  pingpong  8-byte inline RDMA WRITE ping-pong, round-trip time.
 *            verbs: thread A (CPU_APP) WRITEs i into B's buffer with
 *            ql_qp_post_send and spins on its own; thread B (CPU_NIC) spins
 *            and WRITEs i back: two cores, one store each way.
 *            mlx5: one thread (CPU_APP) plays both ends through
 *            qlink/mlx5.h (a WQE and a doorbell each way) and the device's
 *            engine thread (CPU_NIC) executes them: two cores, the way a
 *            GPU (or its CPU stand-in) drives the soft NIC.
 *  rate      8-byte inline WRITEs per second from one QP, signaled every
 *            32nd: verbs, ql_qp_post_send in one thread (it executes the
 *            WRITE itself); mlx5, WQEs and a doorbell per burst from one
 *            thread, executed by the engine.
 *
 * The two are run alternately, ROUNDS times each, and the medians compared
 * (the host's placement of the two vCPUs moves every figure; only ratios
 * taken in one run compare).
 *
 * usage: qlink-bench-mlx5 [-u URI] [-n ITERS] [-r ROUNDS] [-b BURST]
 *                         [-a CPU_APP] [-c CPU_NIC] [-w pingpong|rate|both]
 *                         [-f 64|0|both]
 *
 * -f: the mlx5 QPs' bf_size: 64 (BlueFlame, the soft NIC's default), 0
 * (QL_QP_INIT_MLX5_NO_BF: doorbell record + 8-byte doorbell, the WQE read
 * from the ring) or both (default), each round measuring verbs next to
 * each mode.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/mlx5.h"
#include "qlink/verbs.h"

#define BUF 4096
#define SIG_EVERY 32
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct side {
	struct ql_cq *scq, *rcq;
	struct ql_qp *qp;
	bool mlx5;
	struct ql_mlx5_qp mq;
	struct ql_mlx5_cq mcq;
	uint64_t posted;
};

static struct ql_device *dev;
static struct ql_pd *pd;
static uint8_t *buf_a, *buf_b;
static struct ql_mr *mr_a, *mr_b;
static struct side va, vb, ma, mb;
static int cpu_app, cpu_nic = 1;

#define CHECK(x)                                                                        \
	do {                                                                            \
		int r_ = (x);                                                           \
		if (r_) {                                                               \
			fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #x, \
				strerror(-r_), ql_error_detail());                      \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

static void side_make(struct side *s, bool mlx5, bool bf)
{
	struct ql_qp_init_attr ia;

	memset(s, 0, sizeof(*s));
	s->mlx5 = mlx5;
	if (mlx5) {
		CHECK(ql_cq_create_flags(dev, 256, QL_CQ_INIT_MLX5, &s->scq));
		s->rcq = s->scq;
	} else {
		CHECK(ql_cq_create(dev, 256, &s->scq));
		CHECK(ql_cq_create(dev, 256, &s->rcq));
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->scq;
	ia.recv_cq = s->rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap = (struct ibv_qp_cap){ 256, 16, 1, 1, 64 };
	ia.flags = mlx5 ? QL_QP_INIT_MLX5 | (bf ? 0 : QL_QP_INIT_MLX5_NO_BF) : 0;
	CHECK(ql_qp_create(pd, &ia, &s->qp));
}

static void side_connect(struct side *x, struct side *y)
{
	struct ql_conn_params p;

	CHECK(ql_qp_local_params(y->qp, &p));
	CHECK(ql_qp_connect(x->qp, &p, NULL));
	if (x->mlx5) {
		CHECK(ql_qp_mlx5(x->qp, &x->mq));
		CHECK(ql_cq_mlx5(x->scq, &x->mcq));
	}
}

static void side_free(struct side *s)
{
	CHECK(ql_qp_destroy(s->qp));
	if (s->rcq != s->scq)
		CHECK(ql_cq_destroy(s->rcq));
	CHECK(ql_cq_destroy(s->scq));
}

/* ---- posting one 8-byte inline WRITE --------------------------------- */

static inline void verbs_write(struct side *s, uint64_t *v, uint8_t *dst, struct ql_mr *mr)
{
	struct ibv_sge sge = { (uintptr_t)v, 8, 0 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE },
			   *bad;
	struct ibv_wc wc[8];

	if (++s->posted % SIG_EVERY == 0)
		wr.send_flags = IBV_SEND_SIGNALED;
	wr.send_flags |= IBV_SEND_INLINE;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = ql_mr_rkey(mr);
	CHECK(ql_qp_post_send(s->qp, &wr, &bad));
	if (wr.send_flags & IBV_SEND_SIGNALED) {
		int n;

		while ((n = ql_cq_poll(s->scq, 8, wc)) == 0)
			;
		if (n < 0 || wc[0].status != IBV_WC_SUCCESS) {
			fprintf(stderr, "verbs WRITE failed\n");
			exit(1);
		}
	}
}

/* Reap CQEs until at least `need` basic blocks are free. */
static inline void mlx5_room(struct side *s, uint32_t need)
{
	struct ql_mlx5_cqe_info ci;

	while (ql_mlx5_sq_room(&s->mq.sq) < need) {
		if (ql_mlx5_cq_poll(&s->mcq, &ci) != 1)
			continue;
		if (ci.opcode != QL_MLX5_CQE_REQ) {
			fprintf(stderr, "mlx5 WRITE failed: CQE %u syndrome 0x%x\n", ci.opcode,
				ci.syndrome);
			exit(1);
		}
		ql_mlx5_sq_complete(&s->mq, ci.wqe_counter);
	}
}

/* Write one WQE (no doorbell); returns its control segment. *unrung is
 * the control segment of the last WQE written and not yet rung (NULL:
 * none): rung first when the ring is short of room, since the engine can
 * free nothing it was not told about. */
static inline void *mlx5_write(struct side *s, const uint64_t *v, uint8_t *dst, struct ql_mr *mr,
			       void **unrung)
{
	void *ctrl;
	uint8_t ce = ++s->posted % SIG_EVERY == 0 ? QL_MLX5_WQE_CTRL_CQ_UPDATE : 0;

	if (ql_mlx5_sq_room(&s->mq.sq) < 2) {
		if (unrung && *unrung) {
			ql_mlx5_sq_doorbell(&s->mq, *unrung);
			*unrung = NULL;
		}
		mlx5_room(s, 2);
	}
	if (ql_mlx5_sq_post_write_inline(&s->mq, v, 8, (uintptr_t)dst, ql_mr_rkey(mr), ce, &ctrl)) {
		fprintf(stderr, "ql_mlx5_sq_post_write_inline failed\n");
		exit(1);
	}
	return ctrl;
}

static inline void wait_u64(const uint8_t *p, uint64_t v)
{
	while (__atomic_load_n((const uint64_t *)(const void *)p, __ATOMIC_ACQUIRE) != v)
		;
}

/* ---- ping-pong --------------------------------------------------------- */

struct echo_arg {
	long n;
};

static void *verbs_echo(void *arg)
{
	struct echo_arg *e = arg;
	uint64_t v;

	ql_cpu_pin(cpu_nic);
	for (long i = 1; i <= e->n; i++) {
		wait_u64(buf_b, (uint64_t)i);
		v = (uint64_t)i;
		verbs_write(&vb, &v, buf_a, mr_a);
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void stats(uint64_t *t, long n, double *p50, double *p99)
{
	qsort(t, (size_t)n, sizeof(*t), cmp_u64);
	*p50 = (double)t[n / 2] / 1000.0;
	*p99 = (double)t[n * 99 / 100] / 1000.0;
}

static void pingpong_verbs(long n, uint64_t *t)
{
	struct echo_arg e = { n };
	pthread_t th;
	uint64_t v;

	memset(buf_a, 0, 8);
	memset(buf_b, 0, 8);
	CHECK(-pthread_create(&th, NULL, verbs_echo, &e));
	for (long i = 1; i <= n; i++) {
		uint64_t t0 = ql_clock_ns();

		v = (uint64_t)i;
		verbs_write(&va, &v, buf_b, mr_b);
		wait_u64(buf_a, (uint64_t)i);
		t[i - 1] = ql_clock_ns() - t0;
	}
	pthread_join(th, NULL);
}

static void pingpong_mlx5(long n, uint64_t *t)
{
	uint8_t *pa = buf_a + 64, *pb = buf_b + 64;
	uint64_t v;

	memset(pa, 0, 8);
	memset(pb, 0, 8);
	for (long i = 1; i <= n; i++) {
		uint64_t t0 = ql_clock_ns();

		v = (uint64_t)i;
		ql_mlx5_sq_doorbell(&ma.mq, mlx5_write(&ma, &v, pb, mr_b, NULL));
		wait_u64(pb, (uint64_t)i);
		ql_mlx5_sq_doorbell(&mb.mq, mlx5_write(&mb, &v, pa, mr_a, NULL));
		wait_u64(pa, (uint64_t)i);
		t[i - 1] = ql_clock_ns() - t0;
	}
}

/* ---- rate ----------------------------------------------------------------- */

static double rate_verbs(long n)
{
	uint64_t t0 = ql_clock_ns(), v;

	for (long i = 0; i < n; i++) {
		v = (uint64_t)i;
		verbs_write(&va, &v, buf_b + 128, mr_b);
	}
	return (double)n * 1e3 / (double)(ql_clock_ns() - t0);
}

static double rate_mlx5(long n, int burst)
{
	static uint64_t seq;
	uint64_t t0 = ql_clock_ns(), v = 0;

	for (long i = 0; i < n;) {
		void *ctrl = NULL;

		for (int k = 0; k < burst && i < n; k++, i++) {
			v = ++seq;
			ctrl = mlx5_write(&ma, &v, buf_b + 192, mr_b, &ctrl);
		}
		ql_mlx5_sq_doorbell(&ma.mq, ctrl);
	}
	/* the last WRITE landed: everything before it executed (in order) */
	wait_u64(buf_b + 192, v);
	return (double)n * 1e3 / (double)(ql_clock_ns() - t0);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	const char *uri = "soft://loop", *what = "both";
	long iters = 100000;
	int rounds = 5, burst = 16, opt;
	double vp50[2][64], vp99[2][64], mp50[2][64], mp99[2][64], vr[2][64], mr[2][64];
	int modes[2] = { 1, 0 }; /* BlueFlame (bf_size 64), then bf_size 0 */
	uint64_t *t;

	while ((opt = getopt(argc, argv, "u:n:r:b:a:c:w:f:h")) != -1) {
		switch (opt) {
		case 'u':
			uri = optarg;
			break;
		case 'n':
			iters = atol(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'b':
			burst = atoi(optarg);
			break;
		case 'a':
			cpu_app = atoi(optarg);
			break;
		case 'c':
			cpu_nic = atoi(optarg);
			break;
		case 'w':
			what = optarg;
			break;
		case 'f':
			if (!strcmp(optarg, "64")) {
				modes[1] = -1;
			} else if (!strcmp(optarg, "0")) {
				modes[0] = 0;
				modes[1] = -1;
			} else if (strcmp(optarg, "both")) {
				fprintf(stderr, "%s: -f 64|0|both\n", argv[0]);
				return 2;
			}
			break;
		default:
			fprintf(stderr,
				"usage: %s [-u URI] [-n ITERS] [-r ROUNDS] [-b BURST] [-a CPU_APP] "
				"[-c CPU_NIC] [-w pingpong|rate|both] [-f 64|0|both]\n",
				argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (iters < 100 || rounds < 1 || rounds > 64 || burst < 1 || burst > 64) {
		fprintf(stderr, "%s: -n >= 100, -r 1..64, -b 1..64\n", argv[0]);
		return 2;
	}
	t = calloc((size_t)iters, sizeof(*t));
	if (!t)
		return 1;
	/* the engine thread is made by the first mlx5 QP and inherits this
	 * thread's CPU: CPU_NIC; then this thread moves to CPU_APP */
	ql_cpu_pin(cpu_nic);
	CHECK(ql_device_open(uri, &dev));
	CHECK(ql_pd_alloc(dev, &pd));
	CHECK(ql_pd_mem_alloc(pd, BUF, (void **)&buf_a));
	CHECK(ql_pd_mem_alloc(pd, BUF, (void **)&buf_b));
	CHECK(ql_mr_reg(pd, buf_a, BUF, ACCESS, &mr_a));
	CHECK(ql_mr_reg(pd, buf_b, BUF, ACCESS, &mr_b));
	side_make(&va, false, false);
	side_make(&vb, false, false);
	ql_cpu_pin(cpu_app);
	side_connect(&va, &vb);
	side_connect(&vb, &va);

	printf("# %s, app CPU %d, NIC/peer CPU %d, %ld iterations x %d rounds\n", uri, cpu_app,
	       cpu_nic, iters, rounds);
	for (int r = 0; r < rounds; r++) {
		/* the mlx5 pair is made anew for each mode (BlueFlame or not) and
		 * freed after: the engine visits only the pair measured */
		for (int b = 0; b < 2; b++) {
			const int mode = modes[b];

			if (mode < 0)
				continue;
			ql_cpu_pin(cpu_nic); /* the engine thread inherits it */
			side_make(&ma, true, mode);
			side_make(&mb, true, mode);
			ql_cpu_pin(cpu_app);
			side_connect(&ma, &mb);
			side_connect(&mb, &ma);
			if (strcmp(what, "rate")) {
				pingpong_verbs(iters, t);
				stats(t, iters, &vp50[b][r], &vp99[b][r]);
				pingpong_mlx5(iters, t);
				stats(t, iters, &mp50[b][r], &mp99[b][r]);
				printf("round %d: pingpong RTT p50/p99 us: verbs %.3f/%.3f mlx5 "
				       "bf_size %d %.3f/%.3f (x%.2f)\n",
				       r, vp50[b][r], vp99[b][r], mode ? 64 : 0, mp50[b][r],
				       mp99[b][r], mp50[b][r] / vp50[b][r]);
			}
			if (strcmp(what, "pingpong")) {
				vr[b][r] = rate_verbs(iters * 10);
				mr[b][r] = rate_mlx5(iters * 10, burst);
				printf("round %d: rate 8-byte inline WRITEs, M/s: verbs %.2f mlx5 "
				       "bf_size %d %.2f (burst %d)\n",
				       r, vr[b][r], mode ? 64 : 0, mr[b][r], burst);
			}
			fflush(stdout);
			side_free(&ma);
			side_free(&mb);
		}
	}
	for (int b = 0; b < 2; b++) {
		if (modes[b] < 0)
			continue;
		if (strcmp(what, "rate")) {
			double ratio[64];

			for (int r = 0; r < rounds; r++)
				ratio[r] = mp50[b][r] / vp50[b][r];
			printf("pingpong bf_size %d: RTT median of round p50s: verbs %.3f us, mlx5 "
			       "%.3f us; median of the rounds' ratios %.2f; p99 verbs %.3f mlx5 "
			       "%.3f\n",
			       modes[b] ? 64 : 0, median(vp50[b], rounds), median(mp50[b], rounds),
			       median(ratio, rounds), median(vp99[b], rounds),
			       median(mp99[b], rounds));
		}
		if (strcmp(what, "pingpong"))
			printf("rate bf_size %d median: verbs %.2f M/s, mlx5 %.2f M/s\n",
			       modes[b] ? 64 : 0, median(vr[b], rounds), median(mr[b], rounds));
	}
	side_free(&va);
	side_free(&vb);
	CHECK(ql_mr_dereg(mr_a));
	CHECK(ql_mr_dereg(mr_b));
	CHECK(ql_pd_mem_free(pd, buf_a));
	CHECK(ql_pd_mem_free(pd, buf_b));
	CHECK(ql_pd_free(pd));
	CHECK(ql_device_close(dev));
	free(t);
	return 0;
}
