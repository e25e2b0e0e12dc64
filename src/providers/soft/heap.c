/* SPDX-License-Identifier: MIT */
/*
 * The soft provider's shared heap: one memfd per process that holds every
 * object a peer must reach (device blocks, receive queues) and the memory
 * applications get from ql_mem_alloc(). A peer in another process maps the
 * whole heap once, through /proc/PID/fd/FD, when it connects a QP; the
 * kernel's ptrace access check on that path is the isolation boundary (same
 * user, see docs/soft-provider.md). A heap is never truncated, so a peer's
 * mapping stays valid even after the owner dies.
 *
 * A peer is not trusted with its own memory: every memfd shared here is
 * sealed against resizing (F_SEAL_SHRINK | F_SEAL_GROW, then F_SEAL_SEAL)
 * before its number is published, and a peer's memfd is mapped only after
 * F_GET_SEALS shows F_SEAL_SHRINK and fstat gives the size mapped: a peer
 * that could shrink it would kill us with SIGBUS at our next touch. Every
 * refusal to reach a peer reads the same to the caller (one text, one
 * errno): which check failed goes to the debug log only, so that the error
 * is no oracle on other processes' pids and descriptors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "providers/soft/soft.h"
#include "qlink/error.h"
#include "qlink/log.h"

#define HEAP_MAGIC 0x31504145484c5351ull /* "QLSHEAP1" */
#define HEAP_VERSION 4			 /* 3: memfds sealed; 4: MR iova */
#define HEAP_DEFAULT_SIZE (4ull << 30)
#define HEAP_HDR_RESERVE (64u << 10)
#define PAGE 4096u

struct extent {
	uint64_t off;
	uint64_t len;
};

struct extent_list {
	struct extent *v;
	size_t n;
	size_t cap;
};

static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct soft_heap heap;
static bool heap_ready;
static struct extent_list free_list, used_list;
static struct soft_peer_heap *peers;
static int membarrier_cmd = -1;

#define LIVE_MAGIC 0x3145564c4c534c51ull /* "QLSLLVE1" */
#define LIVE_SIZE 4096u

#define SEALS_REQUIRED F_SEAL_SHRINK
#define SEALS_SET (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define PEER_REFUSED                                                                      \
	"soft+shm: the peer named by the GID cannot be reached (it must be a live qlink " \
	"process of the same user)"

/* This process's devices: id -> private MR table, kept here and not in the
 * heap header (which peers can write). A table is never freed: a QP of this
 * process connected to a closed device keeps a valid (zeroed) table. */
static struct {
	uint32_t id;
	struct soft_dev_shared *sh;
	struct soft_mr_entry *mr;
} own_dev[SOFT_MAX_DEVS_PER_HEAP];

static int live_fd = -1;
static struct soft_live *live;
static int live_err;

/* Take this process's liveness lock on the calling thread, which must be
 * the one that lives as long as the process: the main thread (library
 * constructor) or, in a fork child, the forking thread. */
static void live_create(void)
{
	pthread_mutexattr_t ma;
	void *p;
	int fd = memfd_create("qlink-soft-live", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	live_fd = -1;
	live = NULL;
	if (fd < 0 || ftruncate(fd, LIVE_SIZE) < 0 || fcntl(fd, F_ADD_SEALS, SEALS_SET) < 0) {
		live_err = errno;
		if (fd >= 0)
			close(fd);
		return;
	}
	p = mmap(NULL, LIVE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		live_err = errno;
		close(fd);
		return;
	}
	live = p;
	live->magic = LIVE_MAGIC;
	live->pid = (uint32_t)getpid();
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&live->alive, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_mutex_lock(&live->alive);
	live_fd = fd;
}

static void heap_atfork_child(void)
{
	/* The child shares the parent's heap pages (MAP_SHARED) but owns
	 * none of the parent's objects: it starts a heap of its own. */
	pthread_mutex_init(&heap_lock, NULL);
	heap_ready = false;
	memset(&heap, 0, sizeof(heap));
	free_list = (struct extent_list){ 0 };
	used_list = (struct extent_list){ 0 };
	peers = NULL;
	memset(own_dev, 0, sizeof(own_dev));
	live_create();
}

__attribute__((constructor)) static void soft_live_init(void)
{
	live_create();
	pthread_atfork(NULL, NULL, heap_atfork_child);
}

static size_t heap_size_from_env(void)
{
	const char *e = getenv("QLINK_SOFT_HEAP_SIZE");
	unsigned long long v;
	char *end;

	if (!e || !*e)
		return HEAP_DEFAULT_SIZE;
	v = strtoull(e, &end, 10);
	if (*end == 'K' || *end == 'k')
		v <<= 10;
	else if (*end == 'M' || *end == 'm')
		v <<= 20;
	else if (*end == 'G' || *end == 'g')
		v <<= 30;
	if (v < (16u << 20)) {
		ql_log_warn("soft", "QLINK_SOFT_HEAP_SIZE=%s is below 16M; using 16M", e);
		v = 16u << 20;
	}
	return (size_t)((v + PAGE - 1) & ~(uint64_t)(PAGE - 1));
}

static int list_insert(struct extent_list *l, size_t at, struct extent e)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct extent *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	memmove(&l->v[at + 1], &l->v[at], (l->n - at) * sizeof(*l->v));
	l->v[at] = e;
	l->n++;
	return 0;
}

static void list_remove(struct extent_list *l, size_t at)
{
	memmove(&l->v[at], &l->v[at + 1], (l->n - at - 1) * sizeof(*l->v));
	l->n--;
}

static int heap_create_locked(void)
{
	struct soft_heap_hdr *hdr;
	size_t size = heap_size_from_env();
	void *base;
	int fd, ret;

	if (live_fd < 0)
		return ql_error_set(-(live_err ? live_err : EIO),
				    "soft: cannot create the process liveness page: %s",
				    strerror(live_err ? live_err : EIO));
	fd = memfd_create("qlink-soft-heap", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return ql_error_set(-errno, "soft: memfd_create failed: %s", strerror(errno));
	if (ftruncate(fd, (off_t)size) < 0) {
		ret = ql_error_set(-errno, "soft: cannot size the shared heap to %zu bytes: %s",
				   size, strerror(errno));
		goto err_fd;
	}
	/* Fixed size from now on: a peer that maps it can rely on that. Hole
	 * punching (ql_mem_free) is still allowed: it reads back as zeros. */
	if (fcntl(fd, F_ADD_SEALS, SEALS_SET) < 0) {
		ret = ql_error_set(-errno, "soft: cannot seal the shared heap: %s",
				   strerror(errno));
		goto err_fd;
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (base == MAP_FAILED) {
		ret = ql_error_set(-errno, "soft: cannot map the shared heap: %s", strerror(errno));
		goto err_fd;
	}
	hdr = base;
	hdr->magic = HEAP_MAGIC;
	hdr->version = HEAP_VERSION;
	hdr->pid = (uint32_t)getpid();
	hdr->size = size;
	hdr->base = (uint64_t)(uintptr_t)base;
	hdr->live_fd = live_fd;

	free_list.n = 0;
	used_list.n = 0;
	ret = list_insert(&free_list, 0,
			  (struct extent){ HEAP_HDR_RESERVE, size - HEAP_HDR_RESERVE });
	if (ret)
		goto err_map;
	/* Expedited membarrier reaches exactly the processes that registered:
	 * every qlink process does, here. */
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0) == 0)
		membarrier_cmd = MEMBARRIER_CMD_GLOBAL_EXPEDITED;
	else if (syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0) > 0)
		membarrier_cmd = MEMBARRIER_CMD_GLOBAL;
	else
		membarrier_cmd = 0;

	heap.fd = fd;
	heap.base = base;
	heap.size = size;
	heap.pid = getpid();
	heap.hdr = hdr;
	heap_ready = true;
	return 0;
err_map:
	munmap(base, size);
err_fd:
	close(fd);
	return ret;
}

int ql__soft_heap_get(struct soft_heap **out)
{
	int ret = 0;

	pthread_mutex_lock(&heap_lock);
	if (!heap_ready)
		ret = heap_create_locked();
	pthread_mutex_unlock(&heap_lock);
	if (!ret)
		*out = &heap;
	return ret;
}

void *ql__soft_heap_alloc(size_t len, size_t align)
{
	void *p = NULL;

	if (!len || len > (1ull << 46)) {
		errno = EINVAL;
		return NULL;
	}
	if (align < SOFT_CACHELINE)
		align = SOFT_CACHELINE;
	len = (len + SOFT_CACHELINE - 1) & ~(size_t)(SOFT_CACHELINE - 1);
	pthread_mutex_lock(&heap_lock);
	if (!heap_ready && heap_create_locked()) {
		pthread_mutex_unlock(&heap_lock);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < free_list.n; i++) {
		struct extent e = free_list.v[i];
		uint64_t start = (e.off + align - 1) & ~(uint64_t)(align - 1);
		size_t at;

		if (start + len > e.off + e.len)
			continue;
		/* Record the allocation first so failure leaves lists intact. */
		for (at = 0; at < used_list.n && used_list.v[at].off < start; at++)
			;
		if (list_insert(&used_list, at, (struct extent){ start, len }))
			break;
		list_remove(&free_list, i);
		if (start + len < e.off + e.len &&
		    list_insert(&free_list, i,
				(struct extent){ start + len, e.off + e.len - start - len }))
			ql_log_warn("soft", "heap: lost %llu bytes to an allocation failure",
				    (unsigned long long)(e.off + e.len - start - len));
		if (start > e.off &&
		    list_insert(&free_list, i, (struct extent){ e.off, start - e.off }))
			ql_log_warn("soft", "heap: lost %llu bytes to an allocation failure",
				    (unsigned long long)(start - e.off));
		p = heap.base + start;
		break;
	}
	pthread_mutex_unlock(&heap_lock);
	if (!p)
		errno = ENOMEM;
	return p;
}

static void zero_range(uint64_t off, uint64_t len)
{
	uint64_t a = (off + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	uint64_t b = (off + len) & ~(uint64_t)(PAGE - 1);

	/* Give whole pages back to the kernel (they read as zero again);
	 * clear the partial pages at the edges by hand. */
	if (b > a) {
		if (fallocate(heap.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a,
			      (off_t)(b - a)) < 0)
			memset(heap.base + a, 0, b - a);
		memset(heap.base + off, 0, a - off);
		memset(heap.base + b, 0, off + len - b);
	} else {
		memset(heap.base + off, 0, len);
	}
}

void ql__soft_heap_free(void *p)
{
	uint64_t off;
	size_t i, at;
	struct extent e;

	if (!p)
		return;
	pthread_mutex_lock(&heap_lock);
	if (!heap_ready || (uint8_t *)p < heap.base || (uint8_t *)p >= heap.base + heap.size)
		goto bad;
	off = (uint64_t)((uint8_t *)p - heap.base);
	for (i = 0; i < used_list.n && used_list.v[i].off != off; i++)
		;
	if (i == used_list.n)
		goto bad;
	e = used_list.v[i];
	list_remove(&used_list, i);
	zero_range(e.off, e.len);
	for (at = 0; at < free_list.n && free_list.v[at].off < e.off; at++)
		;
	/* coalesce with neighbours */
	if (at > 0 && free_list.v[at - 1].off + free_list.v[at - 1].len == e.off) {
		free_list.v[at - 1].len += e.len;
		if (at < free_list.n && e.off + e.len == free_list.v[at].off) {
			free_list.v[at - 1].len += free_list.v[at].len;
			list_remove(&free_list, at);
		}
	} else if (at < free_list.n && e.off + e.len == free_list.v[at].off) {
		free_list.v[at].off = e.off;
		free_list.v[at].len += e.len;
	} else if (list_insert(&free_list, at, e)) {
		ql_log_warn("soft", "heap: lost %llu bytes to an allocation failure",
			    (unsigned long long)e.len);
	}
	pthread_mutex_unlock(&heap_lock);
	return;
bad:
	pthread_mutex_unlock(&heap_lock);
	ql_log_error("soft", "ql_mem_free(%p): not memory from ql_mem_alloc", p);
}

bool ql__soft_heap_contains(const void *p, size_t len)
{
	const uint8_t *b = p;

	return heap_ready && b >= heap.base && len <= heap.size &&
	       (size_t)(b - heap.base) <= heap.size - len;
}

int ql__soft_heap_register_dev(struct soft_dev_shared *sh, struct soft_mr_entry **mr_priv)
{
	struct soft_heap_hdr *hdr = heap.hdr;

	pthread_mutex_lock(&heap_lock);
	for (int i = 0; i < SOFT_MAX_DEVS_PER_HEAP; i++) {
		if (own_dev[i].id == 0) {
			if (!own_dev[i].mr)
				own_dev[i].mr = calloc(SOFT_MAX_MR, sizeof(*own_dev[i].mr));
			if (!own_dev[i].mr)
				break;
			own_dev[i].id = sh->id;
			own_dev[i].sh = sh;
			*mr_priv = own_dev[i].mr;
			hdr->dev_off[i] = (uint64_t)((uint8_t *)sh - heap.base);
			atomic_store_explicit(&hdr->dev_id[i], sh->id, memory_order_release);
			pthread_mutex_unlock(&heap_lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&heap_lock);
	return ql_error_set(-EMFILE, "soft: at most %d devices may be open in one process",
			    SOFT_MAX_DEVS_PER_HEAP);
}

void ql__soft_heap_unregister_dev(struct soft_dev_shared *sh)
{
	pthread_mutex_lock(&heap_lock);
	for (int i = 0; i < SOFT_MAX_DEVS_PER_HEAP; i++) {
		if (own_dev[i].id == sh->id) {
			own_dev[i].id = 0;
			memset(own_dev[i].mr, 0, SOFT_MAX_MR * sizeof(*own_dev[i].mr));
			atomic_store(&heap.hdr->dev_id[i], 0);
		}
	}
	pthread_mutex_unlock(&heap_lock);
}

/* Open a peer's memfd through /proc/PID/fd/FD and make sure it is memory
 * the peer cannot shrink: a regular file (O_PATH first, so that a name
 * pointing at a device, FIFO or socket is never opened for I/O), sealed with
 * F_SEAL_SHRINK, at least min bytes. Returns the descriptor and its size,
 * or -1 with the reason in *why (for the debug log only). */
static int open_sealed(pid_t pid, int fd, size_t min, size_t *size, const char **why)
{
	char path[64];
	struct stat st;
	int pfd, rfd, seals;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0) {
		*why = "cannot open /proc/PID/fd/FD";
		return -1;
	}
	if (fstat(pfd, &st) < 0 || !S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		close(pfd);
		return -1;
	}
	/* Reopen the very inode the O_PATH descriptor holds (the peer cannot
	 * swap it under us any more). */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", pfd);
	rfd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	close(pfd);
	if (rfd < 0) {
		*why = "cannot reopen for read/write";
		return -1;
	}
	/* Seals first, then the size: once SHRINK is sealed the size we read
	 * can only grow, so the mapping we make stays backed. */
	seals = fcntl(rfd, F_GET_SEALS);
	if (seals < 0 || (seals & SEALS_REQUIRED) != SEALS_REQUIRED) {
		*why = "not sealed against shrinking (F_SEAL_SHRINK)";
		close(rfd);
		return -1;
	}
	if (fstat(rfd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size < min ||
	    (uint64_t)st.st_size > SIZE_MAX) {
		*why = "too small";
		close(rfd);
		return -1;
	}
	*size = (size_t)st.st_size;
	return rfd;
}

static int map_live(pid_t pid, int fd, struct soft_peer_heap *ph, const char **why)
{
	const struct soft_live *lv;
	size_t size;
	void *p;
	int pfd = open_sealed(pid, fd, LIVE_SIZE, &size, why);

	if (pfd < 0)
		return -1;
	p = mmap(NULL, LIVE_SIZE, PROT_READ, MAP_SHARED, pfd, 0);
	close(pfd);
	if (p == MAP_FAILED) {
		*why = "liveness page: mmap failed";
		return -1;
	}
	lv = p;
	if (SOFT_PEEK(lv->magic) != LIVE_MAGIC || SOFT_PEEK(lv->pid) != (uint32_t)pid) {
		munmap(p, LIVE_SIZE);
		*why = "not a qlink liveness page of that pid";
		return -1;
	}
	ph->live_map = p;
	ph->alive_word = (const _Atomic int *)&lv->alive.__data.__lock;
	return 0;
}

int ql__soft_peer_heap_get(pid_t pid, int fd, struct soft_peer_heap **out)
{
	struct soft_peer_heap *ph;
	const struct soft_heap_hdr *hdr;
	const char *why = NULL;
	size_t size = 0;
	int pfd, live_num;
	void *map;

	pthread_mutex_lock(&heap_lock);
	for (ph = peers; ph; ph = ph->next) {
		if (ph->pid == pid && ph->fd_num == fd) {
			ph->refs++;
			pthread_mutex_unlock(&heap_lock);
			*out = ph;
			return 0;
		}
	}
	ph = calloc(1, sizeof(*ph));
	if (!ph) {
		pthread_mutex_unlock(&heap_lock);
		return -ENOMEM;
	}
	ph->pid = pid;
	ph->fd_num = fd;
	ph->refs = 1;
	if (heap_ready && pid == heap.pid) {
		if (fd != heap.fd) {
			why = "the GID names this process but not its heap";
			goto refused;
		}
		ph->self = true;
		ph->map = heap.base;
		ph->size = heap.size;
		ph->delta = 0;
		/* MRs of this process are checked in their private tables. */
		ph->lo = 0;
		ph->span = UINT64_MAX;
		ph->alive_word = (const _Atomic int *)&live->alive.__data.__lock;
		goto done;
	}
	pfd = open_sealed(pid, fd, HEAP_HDR_RESERVE, &size, &why);
	if (pfd < 0)
		goto refused;
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, pfd, 0);
	close(pfd);
	if (map == MAP_FAILED) {
		why = "heap: mmap failed";
		goto refused;
	}
	hdr = map;
	if (SOFT_PEEK(hdr->magic) != HEAP_MAGIC || SOFT_PEEK(hdr->version) != HEAP_VERSION ||
	    SOFT_PEEK(hdr->pid) != (uint32_t)pid) {
		munmap(map, size);
		why = "not a qlink heap of that pid";
		goto refused;
	}
	/* Everything the header says is the peer's word: keep private copies,
	 * and bound every later access by the size we mapped. */
	ph->map = map;
	ph->size = size;
	ph->lo = SOFT_PEEK(hdr->base);
	ph->span = size;
	ph->delta = (intptr_t)((uintptr_t)map - (uintptr_t)ph->lo);
	live_num = SOFT_PEEK(hdr->live_fd);
	if (map_live(pid, live_num, ph, &why)) {
		munmap(map, size);
		goto refused;
	}
done:
	ph->next = peers;
	peers = ph;
	pthread_mutex_unlock(&heap_lock);
	*out = ph;
	return 0;
refused:
	free(ph);
	pthread_mutex_unlock(&heap_lock);
	ql_log_debug("soft", "peer pid %d fd %d refused: %s", (int)pid, fd, why);
	return ql_error_set(-EHOSTUNREACH, PEER_REFUSED);
}

void ql__soft_peer_heap_put(struct soft_peer_heap *ph)
{
	struct soft_peer_heap **pp;

	if (!ph)
		return;
	pthread_mutex_lock(&heap_lock);
	if (--ph->refs == 0) {
		for (pp = &peers; *pp; pp = &(*pp)->next) {
			if (*pp == ph) {
				*pp = ph->next;
				break;
			}
		}
		if (!ph->self) {
			munmap(ph->map, ph->size);
			munmap(ph->live_map, LIVE_SIZE);
		}
		free(ph);
	}
	pthread_mutex_unlock(&heap_lock);
}

struct soft_dev_shared *ql__soft_peer_find_dev(struct soft_peer_heap *ph, uint32_t id,
					       const struct soft_mr_entry **mr)
{
	const struct soft_heap_hdr *hdr = (const void *)ph->map;
	struct soft_dev_shared *sh = NULL;

	if (ph->self) {
		/* Our own device: found in (and checked against) the private
		 * table, never through the heap header a peer can write. */
		pthread_mutex_lock(&heap_lock);
		for (int i = 0; i < SOFT_MAX_DEVS_PER_HEAP && !sh; i++) {
			if (id && own_dev[i].id == id) {
				sh = own_dev[i].sh;
				*mr = own_dev[i].mr;
			}
		}
		pthread_mutex_unlock(&heap_lock);
		return sh;
	}
	for (int i = 0; i < SOFT_MAX_DEVS_PER_HEAP; i++) {
		if (id && atomic_load_explicit(&hdr->dev_id[i], memory_order_acquire) == id) {
			uint64_t off = SOFT_PEEK(hdr->dev_off[i]), end;

			if (off < HEAP_HDR_RESERVE || off % SOFT_CACHELINE ||
			    __builtin_add_overflow(off, sizeof(*sh), &end) || end > ph->size)
				return NULL;
			sh = (struct soft_dev_shared *)(ph->map + off);
			if (SOFT_PEEK(sh->id) != id)
				return NULL;
			*mr = sh->mr;
			return sh;
		}
	}
	return NULL;
}

void ql__soft_quiesce(void)
{
	/* After this returns, every thread of every qlink process has passed a
	 * full memory barrier: a requester either published its odd op epoch
	 * or will see the state we stored before calling. */
	if (membarrier_cmd > 0 && syscall(__NR_membarrier, membarrier_cmd, 0) == 0)
		return;
	usleep(20000);
}
