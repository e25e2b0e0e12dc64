/* SPDX-License-Identifier: MIT */
/*
 * hotpath: counting interposition of the allocator and lock calls, and a
 * child runner under a seccomp filter (see hotpath.h).
 */
#define _GNU_SOURCE
#include "hotpath.h"

#include <dlfcn.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
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

bool hp_available(void)
{
	return !HP_ASAN;
}

void hp_begin(void)
{
	__atomic_store_n(&n_alloc, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&n_lock, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&counting, 1, __ATOMIC_SEQ_CST);
}

void hp_end(unsigned long *allocs, unsigned long *locks)
{
	__atomic_store_n(&counting, 0, __ATOMIC_SEQ_CST);
	*allocs = __atomic_load_n(&n_alloc, __ATOMIC_SEQ_CST);
	*locks = __atomic_load_n(&n_lock, __ATOMIC_SEQ_CST);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Allow read, write, exit, exit_group, rt_sigreturn and the n system calls
 * in extra (at most 8); kill the process on anything else. A filter rather
 * than SECCOMP_MODE_STRICT, because strict mode also disables RDTSC on x86,
 * which the code under test may use.
 */
int hp_seccomp_allow(const int *extra, int n)
{
	const int base[] = { SYS_read, SYS_write, SYS_exit, SYS_exit_group, SYS_rt_sigreturn };
	const int nb = (int)(sizeof(base) / sizeof(base[0]));
	struct sock_filter f[4 + 5 + 8 + 2];
	struct sock_fprog prog;
	int k = 0, total;

	if (n < 0 || n > 8 || (n && !extra))
		return -1;
	total = nb + n;
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	/* the j-th comparison jumps over the ones after it and the KILL */
	for (int j = 0; j < total; j++)
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
						      (uint32_t)(j < n ? extra[j] : base[j - n]),
						      (uint8_t)(total - j), 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog = (struct sock_fprog){ .len = (unsigned short)k, .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

int hp_run_strict(int (*setup)(void *arg), int (*loop)(void *arg), void *arg, char *why,
		  size_t whylen)
{
	return hp_run_strict_allow(setup, loop, arg, NULL, NULL, why, whylen);
}

int hp_run_strict_allow(int (*setup)(void *arg), int (*loop)(void *arg), void *arg,
			const int *extra, const int *nextra, char *why, size_t whylen)
{
	struct pollfd pfd;
	uint64_t deadline;
	int fds[2], st = 0;
	char res = 0;
	pid_t pid, r;

	if (pipe(fds))
		return snprintf(why, whylen, "pipe failed"), -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return snprintf(why, whylen, "fork failed"), -1;
	if (pid == 0) {
		char c = 'K';

		close(fds[0]);
		alarm(60);
		if (setup(arg))
			_exit(10);
		if (hp_seccomp_allow(extra, nextra ? *nextra : 0))
			_exit(11);
		/* from here on: read, write, exit, sigreturn */
		if (loop(arg))
			c = 'L';
		/* exit_group: the process, with any thread the code under
		 * test started (soft+udp's NIC threads) */
		if (write(fds[1], &c, 1) != 1)
			syscall(SYS_exit_group, 12);
		syscall(SYS_exit_group, 0);
		for (;;)
			;
	}
	close(fds[1]);
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 30000) == 1)
		(void)!read(fds[0], &res, 1);
	close(fds[0]);
	deadline = now_ns() + 10000000000ull;
	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && now_ns() < deadline)
		usleep(1000);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return snprintf(why, whylen, "the child hung"), -1;
	}
	if (WIFSIGNALED(st))
		return snprintf(why, whylen, "the child was killed by signal %d%s", WTERMSIG(st),
				WTERMSIG(st) == SIGKILL || WTERMSIG(st) == SIGSYS ?
					" (seccomp: a system call in the loop)" :
					""),
		       -1;
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return snprintf(why, whylen,
				"the child exited with %d (10: setup, 11: prctl, 12: write)",
				WIFEXITED(st) ? WEXITSTATUS(st) : -1),
		       -1;
	if (res != 'K')
		return snprintf(why, whylen, "the loop failed in the child (%c)", res ? res : '0'),
		       -1;
	return 0;
}

static int hp_no_setup(void *arg)
{
	(void)arg;
	return 0;
}

int hp_check(int (*loop)(void *arg), void *arg, char *why, size_t whylen)
{
	unsigned long allocs, locks;

	if (hp_available()) {
		int ret;

		hp_begin();
		ret = loop(arg);
		hp_end(&allocs, &locks);
		if (ret) {
			snprintf(why, whylen, "the loop failed (%d)", ret);
			return -1;
		}
		if (allocs || locks) {
			snprintf(why, whylen, "%lu allocator calls, %lu lock calls", allocs, locks);
			return -1;
		}
	}
	return hp_run_strict(hp_no_setup, loop, arg, why, whylen);
}
