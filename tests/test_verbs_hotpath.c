/*
 * The hot path (ql_qp_post_send, ql_qp_post_recv, ql_cq_poll) neither
 * allocates, nor locks, nor enters the kernel.
 *
 * (a) This program defines malloc & co. and the pthread lock calls itself,
 *     forwarding to libc through dlsym(RTLD_NEXT), and counts the calls made
 *     during a million WRITE+poll and a million SEND/RECV operations.
 * (b) A forked child sets everything up, switches to seccomp strict mode
 *     (read, write, _exit and sigreturn only; anything else kills it) and
 *     runs post+poll loops; the parent checks it came back alive.
 */
#define _GNU_SOURCE
#include "verbs_fixture.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HP_ASAN 1
#endif
#endif
#ifndef HP_ASAN
#define HP_ASAN 0
#endif

#define HP_OPS 1000000
#define HP_SECCOMP_OPS 100000

/* ---- interposition ---------------------------------------------------- */

static volatile int counting;
static unsigned long n_alloc; /* malloc, calloc, realloc, free, memalign... */
static unsigned long n_lock;  /* pthread mutex and spin locks */

#if !HP_ASAN
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static int (*real_mutex_lock)(pthread_mutex_t *);
static int (*real_mutex_trylock)(pthread_mutex_t *);
static int (*real_spin_lock)(pthread_spinlock_t *);
static int (*real_spin_trylock)(pthread_spinlock_t *);

/* dlsym itself may call calloc/malloc before the real ones are known */
static _Alignas(16) char boot[8192];
static size_t boot_used;
static int resolving;

static void *boot_alloc(size_t n)
{
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (boot_used + n > sizeof(boot))
		abort();
	p = boot + boot_used;
	boot_used += n;
	return p; /* static storage: already zero */
}

static bool in_boot(const void *p)
{
	return (const char *)p >= boot && (const char *)p < boot + sizeof(boot);
}

static void resolve(void)
{
	if (resolving)
		return;
	resolving = 1;
	real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
	real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
	real_mutex_lock = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_lock");
	real_mutex_trylock = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_trylock");
	real_spin_lock = (int (*)(pthread_spinlock_t *))dlsym(RTLD_NEXT, "pthread_spin_lock");
	real_spin_trylock = (int (*)(pthread_spinlock_t *))dlsym(RTLD_NEXT, "pthread_spin_trylock");
	resolving = 0;
}

static inline void count_alloc(void)
{
	if (counting)
		__atomic_add_fetch(&n_alloc, 1, __ATOMIC_RELAXED);
}

static inline void count_lock(void)
{
	if (counting)
		__atomic_add_fetch(&n_lock, 1, __ATOMIC_RELAXED);
}

void *malloc(size_t n)
{
	if (!real_malloc) {
		if (resolving)
			return boot_alloc(n);
		resolve();
	}
	count_alloc();
	return real_malloc(n);
}

void *calloc(size_t a, size_t b)
{
	if (!real_calloc) {
		if (resolving)
			return boot_alloc(a * b);
		resolve();
	}
	count_alloc();
	return real_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	if (in_boot(p)) {
		void *q = malloc(n);

		if (q)
			memcpy(q, p, n < 256 ? n : 256);
		return q;
	}
	if (!real_realloc)
		resolve();
	count_alloc();
	return real_realloc(p, n);
}

void free(void *p)
{
	if (!p || in_boot(p))
		return;
	if (!real_free)
		resolve();
	count_alloc();
	real_free(p);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (!real_posix_memalign)
		resolve();
	count_alloc();
	return real_posix_memalign(out, align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	if (!real_aligned_alloc)
		resolve();
	count_alloc();
	return real_aligned_alloc(align, n);
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (!real_mutex_lock)
		resolve();
	count_lock();
	return real_mutex_lock(m);
}

int pthread_mutex_trylock(pthread_mutex_t *m)
{
	if (!real_mutex_trylock)
		resolve();
	count_lock();
	return real_mutex_trylock(m);
}

int pthread_spin_lock(pthread_spinlock_t *s)
{
	if (!real_spin_lock)
		resolve();
	count_lock();
	return real_spin_lock(s);
}

int pthread_spin_trylock(pthread_spinlock_t *s)
{
	if (!real_spin_trylock)
		resolve();
	count_lock();
	return real_spin_trylock(s);
}
#endif /* !HP_ASAN */

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
	struct vt_pair *pr;
	long failed;

	VT_SOFT_ONLY(p, "post and poll with no allocation and no lock (rxe's provider takes a "
			"spin lock per post, by design)");
	if (HP_ASAN)
		skip(); /* ASan owns malloc */

	/* the counters see calls made while counting, and only then */
	n_alloc = n_lock = 0;
	counting = 1;
	my_free(my_malloc(32));
	my_lock(&m);
	counting = 0;
	pthread_mutex_unlock(&m);
	my_free(my_malloc(32));
	assert_int_equal(n_alloc, 2);
	assert_int_equal(n_lock, 1);

	assert_int_equal(vt_pair_create(p, &o, &pr), 0);
	n_alloc = n_lock = 0;
	counting = 1;
	failed = loop_write(pr, HP_OPS);
	counting = 0;
	assert_int_equal(failed, 0);
	if (n_alloc || n_lock)
		fail_msg("WRITE+poll: %lu allocator calls, %lu lock calls", n_alloc, n_lock);

	counting = 1;
	failed = loop_send_recv(pr, HP_OPS);
	counting = 0;
	assert_int_equal(failed, 0);
	if (n_alloc || n_lock)
		fail_msg("SEND/RECV: %lu allocator calls, %lu lock calls", n_alloc, n_lock);
	vt_pair_destroy(pr);
}

/* ---- (b) no system calls ---------------------------------------------- */

static void seccomp_child(const struct vt_param *p, int wfd)
{
	struct vt_opts o = { .type = IBV_QPT_RC };
	struct vt_pair *pr;
	char res = 'K';

	if (vt_pair_create(p, &o, &pr))
		_exit(10);
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0))
		_exit(11);
	/* from here on: read, write, exit, sigreturn */
	if (loop_write(pr, HP_SECCOMP_OPS))
		res = 'W';
	else if (loop_send_recv(pr, HP_SECCOMP_OPS))
		res = 'S';
	if (write(wfd, &res, 1) != 1)
		syscall(SYS_exit, 12);
	syscall(SYS_exit, 0);
	for (;;)
		;
}

static void test_no_syscalls(void **state)
{
	const struct vt_param *p = *state;
	struct pollfd pfd;
	uint64_t deadline;
	int fds[2], st = 0;
	char res = 0;
	pid_t pid, r;

	VT_SOFT_ONLY(p, "post and poll with no system call (rxe's post_send rings its "
			"doorbell with a system call, by design)");
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		alarm(60);
		seccomp_child(p, fds[1]);
	}
	close(fds[1]);
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 30000) == 1)
		(void)!read(fds[0], &res, 1);
	close(fds[0]);
	deadline = vt_now_ns() + 10000000000ull;
	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && vt_now_ns() < deadline)
		usleep(1000);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		fail_msg("child hung");
	}
	if (WIFSIGNALED(st))
		fail_msg("child killed by signal %d (%s): a system call on the hot path",
			 WTERMSIG(st), WTERMSIG(st) == SIGKILL ? "seccomp" : "other");
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st))
		fail_msg("child exit status %d (10: setup, 11: prctl, 12: write)", WEXITSTATUS(st));
	if (res != 'K')
		fail_msg("child result '%c' (W: WRITE loop failed, S: SEND/RECV loop failed)",
			 res ? res : '0');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_alloc_no_lock),
		cmocka_unit_test(test_no_syscalls),
	};

	return VT_RUN_PER_URI(tests) ? 1 : 0;
}
