/* SPDX-License-Identifier: MIT */
/*
 * qlink-bench-bridge: the CUDA-Q bridge provider's two shapes, round trip
 * per call (docs/cudaq-bridge.md, docs/progress.md §11, issue 24). This
 * process loads libcudaq-realtime-bridge-qlink.so as CUDA-Q does and runs a
 * host dispatcher loop in the shape asked for (after CUDA-Q's host loop:
 * the ring shape polls rx_flags in slot order and flags the reply; the
 * unified shape calls rx_poll and tx_publish), one HOST_CALL function
 * (qlink_parity); `qlink vppu --transport hsb` in a child process is the
 * QCS and prints its report (round trips from the echoed timestamps) on
 * stdout.
 *
 *   qlink-bench-bridge --bridge LIB --qlink PATH [--shape ring|unified]
 *                      [--progress auto|thread|caller] [--count N] [--window N]
 *                      [--device URI]
 *
 * --progress (the bridge's argument, default auto: the default options):
 * thread, a spinning pump; auto, the pump the shared rule picks (spinning
 * with cores to spare, napping when oversubscribed); caller (ring shape),
 * no pump thread: the loop calls qlink_cudaq_bridge_progress while the
 * ring is empty. The host loop, like CUDA-Q's, only pauses when idle: it
 * never yields the core. Exits with the
 * QCS's status (non-zero: a call wrong, lost or late).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <qlink/rpc_wire.h>

#include "bridge/cudaq_bridge_abi.h"
#include "cudaq_host_fn.h"

struct loop {
	bool unified;
	ql_cudaq_bridge_progress_fn progress; /* ring shape, caller: the pump's turn */
	ql_cudaq_bridge_handle_t h;
	ql_cudaq_ringbuffer_t ring;
	ql_cudaq_cpu_dataplane_t dp;
	uint32_t slots;
	int stop;
	int bad;
};

/* One request in slot s: CUDA-Q's host-call path for the one function. */
static void serve(struct loop *l, const ql_cudaq_ringbuffer_t *r, uint32_t s)
{
	const uint8_t *rx = r->rx_data_host + (size_t)s * r->rx_stride_sz;
	uint8_t *tx = r->tx_data_host + (size_t)s * r->tx_stride_sz;

	if (get32(rx) != MAGIC_REQ)
		return;
	qlink_parity(rx, tx, r->rx_stride_sz);
	if (l->unified) {
		if (l->dp.tx_publish(l->dp.ctx, s) != QL_CUDAQ_OK)
			__atomic_store_n(&l->bad, 1, __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(&r->tx_flags_host[s], (uint64_t)(uintptr_t)tx, __ATOMIC_RELEASE);
	}
}

static void *loop_main(void *arg)
{
	struct loop *l = arg;
	const ql_cudaq_ringbuffer_t *r = l->unified ? &l->dp.ring : &l->ring;
	uint32_t cur = 0, slot;

	while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
		bool got;

		if (l->unified) {
			got = l->dp.rx_poll(l->dp.ctx, &slot) == QL_CUDAQ_RX_READY;
		} else {
			got = __atomic_load_n(&r->rx_flags_host[cur], __ATOMIC_ACQUIRE) != 0;
			slot = cur;
			if (!got && l->progress && l->progress(l->h) > 0)
				continue;
		}
		if (!got) {
			/* as CUDA-Q's loops (cudaq_host_dispatcher_loop,
			 * dispatch_core): CUDAQ_REALTIME_CPU_RELAX, a pause, never
			 * a yield nor a sleep */
			cudaq_cpu_relax();
			continue;
		}
		serve(l, r, slot);
		if (!l->unified) {
			__atomic_store_n(&r->rx_flags_host[slot], 0, __ATOMIC_RELEASE);
			cur = (cur + 1) % l->slots;
		}
	}
	return NULL;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: qlink-bench-bridge --bridge LIB --qlink PATH [--shape ring|unified]\n"
		"                          [--progress auto|thread|caller] [--count N] "
		"[--window N] [--device URI]\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *lib_path = NULL, *qlink = NULL, *shape = "ring", *progress = "auto";
	const char *count = "2000", *window = "1";
	char dev[128], params[256], a_dev[160], a_file[300], a_prog[64], dir[] = "/tmp/qlbbXXXXXX";
	ql_cudaq_function_entry_t entry = { 0 };
	ql_cudaq_function_table_t table = { .entries = &entry, .count = 1 };
	ql_cudaq_get_bridge_interface_fn get;
	ql_cudaq_bridge_interface_t *bi;
	struct loop l = { 0 };
	pthread_t th;
	void *lib;
	pid_t pid;
	int st = 1;

	snprintf(dev, sizeof(dev), "soft+shm://qlbb-%d", (int)getpid());
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--bridge"))
			lib_path = argv[i + 1];
		else if (!strcmp(argv[i], "--qlink"))
			qlink = argv[i + 1];
		else if (!strcmp(argv[i], "--shape"))
			shape = argv[i + 1];
		else if (!strcmp(argv[i], "--progress"))
			progress = argv[i + 1];
		else if (!strcmp(argv[i], "--count"))
			count = argv[i + 1];
		else if (!strcmp(argv[i], "--window"))
			window = argv[i + 1];
		else if (!strcmp(argv[i], "--device"))
			snprintf(dev, sizeof(dev), "%s", argv[i + 1]);
		else
			return usage();
	}
	if (!lib_path || !qlink || argc % 2 == 0 ||
	    (strcmp(shape, "ring") && strcmp(shape, "unified")))
		return usage();
	l.unified = !strcmp(shape, "unified");
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 1;
	snprintf(params, sizeof(params), "%s/params", dir);
	snprintf(a_dev, sizeof(a_dev), "--device=%s", dev);
	snprintf(a_file, sizeof(a_file), "--params-file=%s", params);
	snprintf(a_prog, sizeof(a_prog), "--progress=%s", progress);
	lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return fprintf(stderr, "dlopen: %s\n", dlerror()), 1;
	*(void **)&get = dlsym(lib, QL_CUDAQ_BRIDGE_ENTRY);
	*(void **)&l.progress = dlsym(lib, QL_CUDAQ_BRIDGE_PROGRESS);
	if (!get || !l.progress || !(bi = get()))
		return fprintf(stderr, "%s: not a qlink bridge provider\n", lib_path), 1;
	if (l.unified || strcmp(progress, "caller"))
		l.progress = NULL; /* the pump thread, or no pump */
	{
		char *cargv[] = { a_dev,
				  a_file,
				  a_prog,
				  "--num-slots=64",
				  "--slot-size=256",
				  l.unified ? "--unified" : "--dispatch=ring",
				  NULL };

		if (bi->create(&l.h, 6, cargv) != QL_CUDAQ_OK)
			return 1;
	}
	entry.handler.host_fn = qlink_parity;
	entry.function_id = ql_rpc_fnv1a("qlink_parity");
	entry.dispatch_mode = QL_CUDAQ_DISPATCH_HOST_CALL;
	l.slots = 64;
	if (bi->set_function_table(l.h, &table) != QL_CUDAQ_OK ||
	    (l.unified ? bi->get_cpu_dataplane(l.h, &l.dp) :
			 bi->get_transport_context(l.h, QL_CUDAQ_CTX_RING_BUFFER, &l.ring)) !=
		    QL_CUDAQ_OK)
		goto out;
	pid = fork();
	if (pid == 0) {
		/* the QCS: it waits for the params file connect() writes */
		execl(qlink, "qlink", "vppu", "--transport", "hsb", "--params-file", params,
		      "--device", dev, "--count", count, "--window", window, "--cpu", "-1",
		      "--timeout", "60", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || pthread_create(&th, NULL, loop_main, &l))
		goto out;
	if (bi->connect(l.h) == QL_CUDAQ_OK && bi->launch(l.h) == QL_CUDAQ_OK &&
	    waitpid(pid, &st, 0) == pid)
		st = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	else
		kill(pid, SIGKILL), waitpid(pid, NULL, 0);
	__atomic_store_n(&l.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	if (l.bad)
		st = 1;
	bi->disconnect(l.h);
out:
	bi->destroy(l.h);
	rmdir(dir);
	return st;
}
