/* SPDX-License-Identifier: MIT */
/*
 * libcudaq-realtime-bridge-qlink.so without CUDA-Q: this program loads the
 * built provider with dlopen, as CUDA-Q's loader does, checks the v3
 * interface's layout against the documented ABI, and drives the lifecycle as
 * CUDA-Q's test server does (docs/cudaq-bridge.md): create -> geometry and
 * endpoint -> transport context (ring) or CPU data plane (unified) -> a host
 * dispatcher started (written here, after CUDA-Q's host loop) -> connect ->
 * launch -> serve -> dispatcher stopped -> disconnect -> destroy.
 *
 * A forked child plays the QCS: qlink's hsb client over soft+shm, taking the
 * bridge's parameters from the rendezvous file. It sends rpc_increment
 * requests (every reply byte checked), ring laps, a burst of a whole ring,
 * and frames the dispatcher must drop without a reply (bad magic, unknown
 * function, a DEVICE_CALL entry, a frame shorter than its header says),
 * each followed by more good requests (a drop must not stall later
 * replies); then the TX flags: a pretend graph holding its slot in flight
 * (the ring shape sends the next reply only after it), a reply too large to
 * send, a failed graph launch (0xDEAD << 48 | code) and a flag that is no
 * address (ring shape). The dispatcher's processed count must equal the
 * good requests, and the provider's own account at disconnect every frame,
 * reply and refusal.
 * Then the refusals: bad arguments, the wrong context kind for the shape,
 * NULL pointers and handles not made by create, calls out of order, a
 * connect with no QCS (timeout), an empty or malformed function table.
 * And the hot path: the unified hooks allocate nothing, lock nothing and
 * make no system call (tests/hotpath.h). And the ring shape's pump where
 * the process has fewer free cores than spinning threads: the default pump
 * naps (pump=nap on 1 and 2 CPUs), and with every thread on one CPU the
 * ring shape answers 2000 calls in bounded time (docs/progress.md §11).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <qlink/error.h>
#include <qlink/hsb.h>
#include <qlink/rpc_wire.h>

#include "bridge/cudaq_bridge_abi.h"
#include "capture_stderr.h"
#include "cudaq_host_fn.h"
#include "hotpath.h"
#include "transport/rendezvous.h" /* libqlink.a: the QCS side of the rendezvous */

#define SLOTS 4
#define STRIDE 256
/* the frame: the slot less the board's 128 bytes of metadata */
#define FRAME (STRIDE - 128)
#define MAX_ARG (FRAME - 24)
#define WAIT_MS 5000
#define SILENCE_MS 300

/* what the QCS sends, and so what the dispatcher must count */
#define N_SINGLE 13 /* three laps of a 4-slot ring and one more */
#define N_GOOD (N_SINGLE + SLOTS + 1 + 1 + 3 + 2 + 2 + 1)
/* the dispatcher also counts too_big (its handler ran, its reply was
 * published: the transport refuses to send it) */
#define N_COUNTED(unified) (N_GOOD + 1 + ((unified) ? 0 : 1))

static void *lib;
static ql_cudaq_bridge_interface_t *bi;
/* qlink's extension: the ring shape's pump in the caller */
static ql_cudaq_bridge_progress_fn progress_fn;
/* QLINK_PROGRESS=caller (the test's caller variant): the ring shape runs
 * with --progress=caller and the dispatcher loop below calls the pump's
 * turn while the ring is empty, as a program running its own loop does */
static bool ring_caller;
/* QLINK_PROGRESS=thread (the _thread twin): the ring shape's spinning pump
 * (--progress=thread); otherwise --progress=auto */
static bool ring_thread;
static unsigned int dev_seq;
static cpu_set_t all_cpus; /* this process's affinity mask at start */
static pid_t child = -1;   /* the QCS of a lifecycle test, killed if it fails */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---- the host dispatcher (after CUDA-Q's host loop) --------------------------- */

struct disp {
	bool unified;
	uint32_t num_slots;
	ql_cudaq_ringbuffer_t ring;
	ql_cudaq_cpu_dataplane_t dp;
	ql_cudaq_function_entry_t entries[7];
	ql_cudaq_function_table_t table;
	int shutdown;
	uint64_t stats;
	int bad;	 /* a contract broken: non-zero (set by the loop) */
	bool pause_only; /* idle: a pause, never a yield (CUDA-Q's own loops) */
	pthread_t th;
	ql_cudaq_bridge_handle_t h; /* ring_caller: the pump's turn when idle */
	/* a pretend graph (GRAPH_LAUNCH): running for one slot until due */
	bool graph_pending;
	uint32_t graph_slot;
	uint64_t graph_due;
	const uint8_t *graph_rx;
};

/* writes a result_len no slot holds: the reply must not be sent */
static void too_big(const void *rx_slot, void *tx_slot, size_t slot_size)
{
	rpc_increment(rx_slot, tx_slot, slot_size);
	put32((uint8_t *)tx_slot + 8, (uint32_t)slot_size);
}

#define GRAPH_MS 30
#define TX_ERROR(code) ((QL_CUDAQ_TX_ERR_TAG << 48) | (code))

static const ql_cudaq_function_entry_t *lookup(const struct disp *d, uint32_t id)
{
	for (uint32_t i = 0; i < d->table.count; i++)
		if (d->table.entries[i].function_id == id)
			return &d->table.entries[i];
	return NULL;
}

/* One request: the reply written and published, or dropped (false). */
static bool dispatch_one(struct disp *d, const uint8_t *rx, uint8_t *tx, size_t slot_size)
{
	const ql_cudaq_function_entry_t *e;

	if (get32(rx) != MAGIC_REQ)
		return false;
	e = lookup(d, get32(rx + 4));
	if (!e || e->dispatch_mode != QL_CUDAQ_DISPATCH_HOST_CALL || !e->handler.host_fn)
		return false;
	e->handler.host_fn(rx, tx, slot_size);
	return true;
}

static void set_bad(struct disp *d, int why)
{
	__atomic_store_n(&d->bad, why, __ATOMIC_RELAXED);
}

/* The pretend graph finished: its reply, then the flag (ring) or
 * tx_publish (unified: the dispatcher owns TX, then clears its marker). */
static void graph_service(struct disp *d, const ql_cudaq_ringbuffer_t *r)
{
	uint32_t s = d->graph_slot;
	uint8_t *tx = r->tx_data_host + (size_t)s * r->tx_stride_sz;

	if (!d->graph_pending || now_ms() < d->graph_due)
		return;
	rpc_increment(d->graph_rx, tx, r->rx_stride_sz);
	if (d->unified) {
		if (d->dp.tx_publish(d->dp.ctx, s) != QL_CUDAQ_OK)
			set_bad(d, 5);
		__atomic_store_n(&r->tx_flags_host[s], 0, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&r->tx_flags_host[s], (uint64_t)(uintptr_t)tx, __ATOMIC_RELEASE);
	}
	d->graph_pending = false;
}

/* A request in slot s: as CUDA-Q's host loop (section "How the host
 * dispatcher treats a request" of docs/cudaq-bridge.md's sources), plus a
 * pretend graph engine and two broken publishers for the TX-flag cases.
 * Returns what the processed count gains. */
static uint64_t dispatch(struct disp *d, const ql_cudaq_ringbuffer_t *r, uint32_t s,
			 const uint8_t *rx)
{
	uint8_t *tx = r->tx_data_host + (size_t)s * r->tx_stride_sz;
	volatile uint64_t *txf = &r->tx_flags_host[s];
	const ql_cudaq_function_entry_t *e;
	uint32_t id;

	if (get32(rx) != MAGIC_REQ)
		return 0;
	id = get32(rx + 4);
	e = lookup(d, id);
	if (!e)
		return 0;
	if (e->dispatch_mode == QL_CUDAQ_DISPATCH_GRAPH_LAUNCH) {
		if (id == ql_rpc_fnv1a("graph_fail")) {
			/* the launch failed: the error marker, no reply */
			__atomic_store_n(txf, TX_ERROR(7), __ATOMIC_RELEASE);
			return 0;
		}
		if (d->graph_pending)
			set_bad(d, 6);
		d->graph_pending = true;
		d->graph_slot = s;
		d->graph_rx = rx;
		d->graph_due = now_ms() + GRAPH_MS;
		__atomic_store_n(txf, QL_CUDAQ_TX_IN_FLIGHT, __ATOMIC_RELEASE);
		return 1; /* counted at launch */
	}
	if (e->dispatch_mode != QL_CUDAQ_DISPATCH_HOST_CALL || !e->handler.host_fn)
		return 0;
	e->handler.host_fn(rx, tx, r->rx_stride_sz);
	if (id == ql_rpc_fnv1a("bogus_flag")) {
		/* neither 0, a marker nor the slot's address */
		__atomic_store_n(txf, 0x1234, __ATOMIC_RELEASE);
		return 0;
	}
	if (!d->unified) {
		__atomic_store_n(txf, (uint64_t)(uintptr_t)tx, __ATOMIC_RELEASE);
	} else if (d->dp.tx_publish(d->dp.ctx, s) !=
		   (id == ql_rpc_fnv1a("too_big") ? QL_CUDAQ_ERR_INVALID_ARG : QL_CUDAQ_OK)) {
		set_bad(d, 4);
	}
	return 1;
}

static void *disp_main(void *arg)
{
	struct disp *d = arg;
	const ql_cudaq_ringbuffer_t *r = d->unified ? &d->dp.ring : &d->ring;
	size_t stride = r->rx_stride_sz, cur = 0;
	uint64_t count = 0;
	unsigned int idle = 0;

	while (!__atomic_load_n(&d->shutdown, __ATOMIC_ACQUIRE)) {
		uint8_t *rx;
		uint32_t slot = UINT32_MAX;

		graph_service(d, r);
		if (d->unified) {
			if (d->dp.rx_poll(d->dp.ctx, &slot) != QL_CUDAQ_RX_READY) {
				if (slot != UINT32_MAX)
					set_bad(d, 1);
				if (++idle > 256)
					sched_yield();
				continue;
			}
			if (slot >= d->num_slots) {
				set_bad(d, 2);
				continue;
			}
			rx = r->rx_data_host + (size_t)slot * stride;
		} else {
			uint64_t v = __atomic_load_n(&r->rx_flags_host[cur], __ATOMIC_ACQUIRE);

			if (!v && ring_caller && progress_fn(d->h) > 0)
				continue; /* it moved something: look again */
			if (!v) {
				if (d->pause_only)
					cudaq_cpu_relax();
				else if (++idle > 256)
					sched_yield();
				continue;
			}
			slot = (uint32_t)cur;
			rx = (uint8_t *)(uintptr_t)v;
			/* address-as-flag: the flag is the slot's own address */
			if (rx != r->rx_data_host + cur * stride)
				set_bad(d, 3);
		}
		idle = 0;
		count += dispatch(d, r, slot, rx);
		if (!d->unified) {
			/* retire: the reply (if any) was flagged first */
			__atomic_store_n(&r->rx_flags_host[slot], 0, __ATOMIC_RELEASE);
			cur = (cur + 1) % d->num_slots;
		}
	}
	d->stats += count;
	return NULL;
}

static void table_init(struct disp *d)
{
	memset(d->entries, 0, sizeof(d->entries));
	d->entries[0].handler.host_fn = rpc_increment;
	d->entries[0].function_id = ql_rpc_fnv1a("rpc_increment");
	d->entries[0].dispatch_mode = QL_CUDAQ_DISPATCH_HOST_CALL;
	d->entries[0].schema.num_args = 1;
	d->entries[0].schema.args[0].type_id = 0x20;
	d->entries[0].schema.num_results = 1;
	d->entries[0].schema.results[0].type_id = 0x20;
	/* a device function: the host loop treats it as unknown */
	d->entries[1].function_id = ql_rpc_fnv1a("device_only");
	d->entries[1].dispatch_mode = QL_CUDAQ_DISPATCH_DEVICE_CALL;
	d->entries[2].handler.host_fn = qlink_parity;
	d->entries[2].function_id = ql_rpc_fnv1a("qlink_parity");
	d->entries[2].dispatch_mode = QL_CUDAQ_DISPATCH_HOST_CALL;
	d->entries[3].handler.host_fn = rpc_increment; /* the pretend graph's work */
	d->entries[3].function_id = ql_rpc_fnv1a("graph_inc");
	d->entries[3].dispatch_mode = QL_CUDAQ_DISPATCH_GRAPH_LAUNCH;
	d->entries[4].function_id = ql_rpc_fnv1a("graph_fail");
	d->entries[4].dispatch_mode = QL_CUDAQ_DISPATCH_GRAPH_LAUNCH;
	d->entries[5].handler.host_fn = rpc_increment;
	d->entries[5].function_id = ql_rpc_fnv1a("bogus_flag");
	d->entries[5].dispatch_mode = QL_CUDAQ_DISPATCH_HOST_CALL;
	d->entries[6].handler.host_fn = too_big;
	d->entries[6].function_id = ql_rpc_fnv1a("too_big");
	d->entries[6].dispatch_mode = QL_CUDAQ_DISPATCH_HOST_CALL;
	d->table.entries = d->entries;
	d->table.count = 7;
}

/* ---- the QCS: a forked child with qlink's hsb client -------------------------- */

struct qcs {
	struct ql_device *dev;
	struct ql_hsb_client *cl;
	uint32_t next_id;
};

static int rdv_idle(void *ctx)
{
	(void)ctx;
	sleep_ms(10);
	return 0;
}

#define CHILD_FAIL(code, ...)                               \
	do {                                                \
		fprintf(stderr, "qcs child: " __VA_ARGS__); \
		fprintf(stderr, "\n");                      \
		return code;                                \
	} while (0)

static uint32_t make_req(uint8_t *buf, uint32_t fid, uint32_t id, uint32_t arg_len)
{
	memset(buf, 0, STRIDE);
	put32(buf, MAGIC_REQ);
	put32(buf + 4, fid);
	put32(buf + 8, arg_len);
	put32(buf + 12, id);
	put64(buf + 16, ((uint64_t)id << 32) | 0xc0de);
	for (uint32_t i = 0; i < arg_len; i++)
		buf[24 + i] = (uint8_t)(id * 13 + i * 7 + 255);
	return 24 + arg_len;
}

/* The reply to make_req(id, arg_len), every byte. */
static int check_reply(const uint8_t *r, uint32_t len, uint32_t id, uint32_t arg_len)
{
	if (len != 24 + arg_len || get32(r) != MAGIC_RESP || get32(r + 4) != 0 ||
	    get32(r + 8) != arg_len || get32(r + 12) != id ||
	    get64(r + 16) != (((uint64_t)id << 32) | 0xc0de))
		return -1;
	for (uint32_t i = 0; i < arg_len; i++)
		if (r[24 + i] != (uint8_t)(id * 13 + i * 7 + 255 + 1))
			return -1;
	return 0;
}

/* One reply within ms: its request_id (and arg_len), or -1. */
static int wait_reply(struct qcs *q, int ms, uint32_t *id, uint8_t *copy, uint32_t *len)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	struct ql_ring_response r;

	do {
		int n = ql_hsb_client_poll(q->cl, &r, 1);

		if (n < 0)
			return -1;
		if (n == 1) {
			*len = r.len < STRIDE ? r.len : STRIDE;
			memcpy(copy, r.msg, *len);
			*len = r.len;
			*id = r.len >= 16 ? get32(r.msg + 12) : 0;
			ql_hsb_client_release(q->cl, &r);
			return 0;
		}
	} while (now_ms() < end);
	return -1;
}

static int call(struct qcs *q, uint32_t arg_len)
{
	uint8_t req[STRIDE], resp[STRIDE];
	uint32_t id = q->next_id++, got, len;

	make_req(req, ql_rpc_fnv1a("rpc_increment"), id, arg_len);
	if (ql_hsb_client_send(q->cl, req, 24 + arg_len))
		CHILD_FAIL(-1, "send %u: %s", id, ql_error_detail());
	if (wait_reply(q, WAIT_MS, &got, resp, &len))
		CHILD_FAIL(-1, "no reply to request %u", id);
	if (got != id || check_reply(resp, len, id, arg_len))
		CHILD_FAIL(-1, "wrong reply to request %u (got id %u, %u bytes)", id, got, len);
	return 0;
}

/* A frame the dispatcher must drop: nothing comes back; forget it. */
static int dropped(struct qcs *q, const uint8_t *frame, uint32_t len, const char *what)
{
	uint8_t resp[STRIDE];
	uint32_t got, rlen;

	if (ql_hsb_client_send(q->cl, frame, len))
		CHILD_FAIL(-1, "send (%s): %s", what, ql_error_detail());
	if (!wait_reply(q, SILENCE_MS, &got, resp, &rlen))
		CHILD_FAIL(-1, "%s was answered (id %u)", what, got);
	ql_hsb_client_forget(q->cl, 1);
	return 0;
}

/* A pretend graph (~GRAPH_MS) and a request right behind it: the ring
 * shape holds the second reply behind the in-flight marker (request order);
 * the unified shape publishes by slot, in either order. */
static int graph_pair(struct qcs *q, bool unified)
{
	uint8_t req[STRIDE], resp[STRIDE];
	uint32_t g = q->next_id++, n = q->next_id++, got, len, seen = 0;

	make_req(req, ql_rpc_fnv1a("graph_inc"), g, 8);
	if (ql_hsb_client_send(q->cl, req, 32))
		CHILD_FAIL(-1, "send graph: %s", ql_error_detail());
	make_req(req, ql_rpc_fnv1a("rpc_increment"), n, 9);
	if (ql_hsb_client_send(q->cl, req, 33))
		CHILD_FAIL(-1, "send after graph: %s", ql_error_detail());
	for (int i = 0; i < 2; i++) {
		if (wait_reply(q, WAIT_MS, &got, resp, &len))
			CHILD_FAIL(-1, "graph pair: reply %d missing", i);
		if (!unified && got != (i ? n : g))
			CHILD_FAIL(-1, "ring shape: reply %u before the graph's", got);
		if ((got != g && got != n) || check_reply(resp, len, got, got == g ? 8 : 9) ||
		    (seen & (got == g ? 1u : 2u)))
			CHILD_FAIL(-1, "graph pair: wrong reply %u", got);
		seen |= got == g ? 1u : 2u;
	}
	return 0;
}

static int qcs_run(struct qcs *q, bool unified)
{
	uint8_t req[STRIDE], resp[STRIDE];
	uint32_t seen = 0, first, got, len;

	/* single calls: laps of the ring, arguments from 0 to a full slot */
	for (int i = 0; i < N_SINGLE; i++)
		if (call(q, i == 0 ? 0 : i == 1 ? MAX_ARG : (uint32_t)(i * 17) % MAX_ARG))
			return 10;
	/* a burst: the whole ring in flight, then every reply */
	first = q->next_id;
	for (int i = 0; i < SLOTS; i++) {
		uint32_t id = q->next_id++;

		make_req(req, ql_rpc_fnv1a("rpc_increment"), id, 40 + (uint32_t)i);
		if (ql_hsb_client_send(q->cl, req, 24 + 40 + (uint32_t)i))
			CHILD_FAIL(11, "burst send %u: %s", id, ql_error_detail());
	}
	for (int i = 0; i < SLOTS; i++) {
		/* in request order: a QCS matches replies as a FIFO */
		if (wait_reply(q, WAIT_MS, &got, resp, &len) || got != first + (uint32_t)i ||
		    (seen & (1u << (got - first))) ||
		    check_reply(resp, len, got, 40 + (got - first)))
			CHILD_FAIL(12, "burst reply %d wrong, out of order or missing", i);
		seen |= 1u << (got - first);
	}
	/* bad magic: dropped; the next request still answered */
	make_req(req, ql_rpc_fnv1a("rpc_increment"), 9999, 8);
	put32(req, 0xdeadbeef);
	if (dropped(q, req, 32, "bad magic") || call(q, 8))
		return 13;
	/* an unknown function (CUDA-Q's test uses this name) */
	make_req(req, 0xb18ae409, 9998, 8);
	if (ql_rpc_fnv1a("no_such_function") != 0xb18ae409)
		CHILD_FAIL(14, "FNV-1a of no_such_function");
	if (dropped(q, req, 32, "unknown function") || call(q, 16))
		return 14;
	/* a DEVICE_CALL entry reaching the host loop: as unknown */
	make_req(req, ql_rpc_fnv1a("device_only"), 9997, 8);
	if (dropped(q, req, 32, "device call") || call(q, 3) || call(q, 4) || call(q, 5))
		return 15;
	/* the header claims more than the frame holds (arg_len one past it;
	 * 10 bytes sent, the frame padded to its length) */
	make_req(req, ql_rpc_fnv1a("rpc_increment"), 9996, MAX_ARG + 1);
	if (dropped(q, req, 34, "truncated frame") || call(q, 1) || call(q, MAX_ARG))
		return 16;
	/* the TX flags: a graph in flight, a reply too big to send, and (ring)
	 * a failed graph launch and a flag that is no address */
	if (graph_pair(q, unified))
		return 17;
	make_req(req, ql_rpc_fnv1a("too_big"), 9995, 8);
	if (dropped(q, req, 32, "too big a reply") || call(q, 2))
		return 18;
	if (!unified) {
		make_req(req, ql_rpc_fnv1a("graph_fail"), 9994, 8);
		if (dropped(q, req, 32, "failed graph"))
			return 19;
		make_req(req, ql_rpc_fnv1a("bogus_flag"), 9993, 8);
		if (dropped(q, req, 32, "bogus tx flag") || call(q, 3))
			return 19;
	}
	if (q->next_id - 1 != N_GOOD + (unified ? 0u : 1u))
		CHILD_FAIL(20, "sent %u good requests, expected %u", q->next_id - 1,
			   N_GOOD + !unified);
	return 0;
}

static int qcs_child(const char *file, const char *uri, bool unified)
{
	struct ql_hsb_client_config cc = { 0 };
	struct ql_rdv r;
	struct ql_hsb_params hp;
	struct ql_conn_params cp;
	struct qcs q = { .next_id = 1 };
	int ret;

	if (ql__rdv_init(&r, file) || ql__rdv_wait_server_hsb(&r, 30, rdv_idle, NULL, &hp))
		CHILD_FAIL(2, "no bridge parameters in %s: %s", file, ql_error_detail());
	if (hp.num_pages != SLOTS || hp.page_size != STRIDE || hp.page_addr != 0 ||
	    hp.resp_size != STRIDE)
		CHILD_FAIL(3, "parameters: %u pages of %u, resp_size %u", hp.num_pages,
			   hp.page_size, hp.resp_size);
	cc.recv_size = hp.resp_size;
	if (ql_device_open(uri, &q.dev) || ql_hsb_client_create(q.dev, &cc, &q.cl) ||
	    ql_hsb_client_local_params(q.cl, &cp))
		CHILD_FAIL(4, "client: %s", ql_error_detail());
	if (ql__rdv_join(&r, &cp, 30, rdv_idle, NULL) || ql_hsb_client_connect(q.cl, &hp, NULL))
		CHILD_FAIL(5, "join: %s", ql_error_detail());
	ret = qcs_run(&q, unified);
	ql__rdv_cleanup(&r);
	ql_hsb_client_destroy(q.cl);
	ql_device_close(q.dev);
	return ret;
}

/* ---- the loader ----------------------------------------------------------- */

static int group_setup(void **state)
{
	ql_cudaq_get_bridge_interface_fn get;

	(void)state;
	lib = dlopen(QL_BRIDGE_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		print_error("dlopen %s: %s\n", QL_BRIDGE_LIB, dlerror());
		return -1;
	}
	*(void **)&get = dlsym(lib, QL_CUDAQ_BRIDGE_ENTRY);
	if (!get) {
		print_error("dlsym %s: %s\n", QL_CUDAQ_BRIDGE_ENTRY, dlerror());
		return -1;
	}
	bi = get();
	*(void **)&progress_fn = dlsym(lib, QL_CUDAQ_BRIDGE_PROGRESS);
	if (!progress_fn) {
		print_error("dlsym %s: %s\n", QL_CUDAQ_BRIDGE_PROGRESS, dlerror());
		return -1;
	}
	ring_caller = getenv("QLINK_PROGRESS") && !strcmp(getenv("QLINK_PROGRESS"), "caller");
	ring_thread = getenv("QLINK_PROGRESS") && !strcmp(getenv("QLINK_PROGRESS"), "thread");
	if (sched_getaffinity(0, sizeof(all_cpus), &all_cpus))
		return -1;
	return bi ? 0 : -1;
}

/* The library stays loaded, as CUDA-Q's loader keeps it (cached per name,
 * never closed): qlink's process-wide state inside it (the device
 * registry) lives until exit, and LeakSanitizer would count it lost once
 * dlclose unmapped the pointers to it. */
static int group_teardown(void **state)
{
	(void)state;
	return 0;
}

/* The layout CUDA-Q reads (LP64), field by field, and the provider's table
 * read through those offsets. */
static void test_abi_layout(void **state)
{
	const uint8_t *raw = (const uint8_t *)bi;
	void *fp;

	(void)state;
	assert_int_equal(sizeof(ql_cudaq_ringbuffer_t), 80);
	assert_int_equal(offsetof(ql_cudaq_ringbuffer_t, rx_flags), 0);
	assert_int_equal(offsetof(ql_cudaq_ringbuffer_t, tx_flags), 8);
	assert_int_equal(offsetof(ql_cudaq_ringbuffer_t, rx_data), 16);
	assert_int_equal(offsetof(ql_cudaq_ringbuffer_t, tx_data), 24);
	assert_int_equal(offsetof(ql_cudaq_ringbuffer_t, rx_stride_sz), 32);
	assert_int_equal(offsetof(ql_cudaq_ringbuffer_t, tx_stride_sz), 40);
	assert_int_equal(offsetof(ql_cudaq_ringbuffer_t, rx_flags_host), 48);
	assert_int_equal(offsetof(ql_cudaq_ringbuffer_t, tx_flags_host), 56);
	assert_int_equal(offsetof(ql_cudaq_ringbuffer_t, rx_data_host), 64);
	assert_int_equal(offsetof(ql_cudaq_ringbuffer_t, tx_data_host), 72);
	assert_int_equal(sizeof(ql_cudaq_cpu_dataplane_t), 104);
	assert_int_equal(offsetof(ql_cudaq_cpu_dataplane_t, ring), 8);
	assert_int_equal(offsetof(ql_cudaq_cpu_dataplane_t, rx_poll), 88);
	assert_int_equal(offsetof(ql_cudaq_cpu_dataplane_t, tx_publish), 96);
	assert_int_equal(sizeof(ql_cudaq_unified_ctx_t), 16);
	assert_int_equal(sizeof(ql_cudaq_type_desc_t), 12);
	assert_int_equal(sizeof(ql_cudaq_schema_t), 148);
	assert_int_equal(offsetof(ql_cudaq_schema_t, args), 4);
	assert_int_equal(offsetof(ql_cudaq_schema_t, results), 100);
	assert_int_equal(sizeof(ql_cudaq_function_entry_t), 176);
	assert_int_equal(offsetof(ql_cudaq_function_entry_t, function_id), 8);
	assert_int_equal(offsetof(ql_cudaq_function_entry_t, dispatch_mode), 12);
	assert_int_equal(offsetof(ql_cudaq_function_entry_t, schema), 16);
	assert_int_equal(offsetof(ql_cudaq_function_entry_t, routing_key), 168);
	assert_int_equal(sizeof(ql_cudaq_function_table_t), 16);
	assert_int_equal(offsetof(ql_cudaq_function_table_t, count), 8);
	assert_int_equal(sizeof(ql_cudaq_bridge_interface_t), 88);
	/* the values CUDA-Q compares with */
	assert_int_equal(QL_CUDAQ_OK, 0);
	assert_int_equal(QL_CUDAQ_ERR_INVALID_ARG, 1);
	assert_int_equal(QL_CUDAQ_ERR_INTERNAL, 2);
	assert_int_equal(QL_CUDAQ_ERR_CUDA, 3);
	assert_int_equal(QL_CUDAQ_ERR_UNSUPPORTED, 4);
	assert_int_equal(QL_CUDAQ_CTX_RING_BUFFER, 0);
	assert_int_equal(QL_CUDAQ_CTX_UNIFIED, 1);
	assert_int_equal(QL_CUDAQ_RX_READY, 0);
	assert_int_equal(QL_CUDAQ_RX_EMPTY, 1);
	/* the provider's table, read as raw words at the documented offsets:
	 * int version at 0, then eleven... ten function pointers from 8 */
	assert_int_equal(*(const int *)raw, 3);
	for (size_t off = 8; off <= 80; off += 8) {
		memcpy(&fp, raw + off, sizeof(fp));
		assert_non_null(fp); /* all of v1..v3 implemented */
	}
	memcpy(&fp, raw + 8, sizeof(fp));
	assert_ptr_equal(fp, *(void **)&bi->create);
	memcpy(&fp, raw + 56, sizeof(fp));
	assert_ptr_equal(fp, *(void **)&bi->get_cpu_dataplane);
	memcpy(&fp, raw + 80, sizeof(fp));
	assert_ptr_equal(fp, *(void **)&bi->set_function_table);
	/* the same table every call, and the only symbol a loader needs */
	assert_ptr_equal(((ql_cudaq_get_bridge_interface_fn)dlsym(lib, QL_CUDAQ_BRIDGE_ENTRY))(),
			 bi);
	assert_null(dlsym(lib, "ql_device_open"));
	assert_null(dlsym(lib, "ql__rdv_init"));
}

/* ---- the lifecycle against the QCS ---------------------------------------- */

struct scratch {
	char dir[64];
	char file[96];
	char uri_s[QL_DEVICE_URI_MAX], uri_c[QL_DEVICE_URI_MAX];
	char a_dev[200], a_file[200];
};

static void scratch_init(struct scratch *s)
{
	snprintf(s->dir, sizeof(s->dir), "/tmp/qlbridge.XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	snprintf(s->file, sizeof(s->file), "%s/params", s->dir);
	snprintf(s->uri_s, sizeof(s->uri_s), "soft+shm://qlb-%d-%u-s", (int)getpid(), dev_seq);
	snprintf(s->uri_c, sizeof(s->uri_c), "soft+shm://qlb-%d-%u-c", (int)getpid(), dev_seq);
	dev_seq++;
	snprintf(s->a_dev, sizeof(s->a_dev), "--device=%s", s->uri_s);
	snprintf(s->a_file, sizeof(s->a_file), "--params-file=%s", s->file);
}

/* Every file the rendezvous made is gone: the directory removes. */
static void scratch_done(struct scratch *s)
{
	struct stat st;

	assert_int_equal(stat(s->file, &st), -1);
	assert_int_equal(rmdir(s->dir), 0);
}

static int wait_child(pid_t pid, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
		if (now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		sleep_ms(20);
	}
}

/* The QCS: this program's hsb client, or the `qlink vppu` tool. */
enum qcs_kind { QCS_CLIENT, QCS_VPPU };
#define VPPU_CALLS 300

/* disconnect(h), its stderr line into buf */
static void disconnect_capture(ql_cudaq_bridge_handle_t h, char *buf, size_t len)
{
	struct capture_stderr c;

	capture_stderr_begin(&c);
	assert_int_equal(bi->disconnect(h), QL_CUDAQ_OK);
	fputs(capture_stderr_end(&c, buf, len), stderr);
}

static void lifecycle(bool unified, enum qcs_kind kind)
{
	struct scratch s;
	struct disp d = { .unified = unified };
	ql_cudaq_bridge_handle_t h = NULL;
	ql_cudaq_unified_ctx_t uctx;
	ql_cudaq_ringbuffer_t ring;
	ql_cudaq_cpu_dataplane_t dp;
	uint32_t n = 0, sz = 0, slot = 77;
	char ep[512], want[160];
	pid_t pid;
	int rc;

	scratch_init(&s);
	/* the QCS first, before this process has threads or devices */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0 && kind == QCS_CLIENT)
		_exit(qcs_child(s.file, s.uri_c, unified));
	if (pid == 0) {
		char uri[200];

		snprintf(uri, sizeof(uri), "%s", s.uri_c);
		execl(QL_TEST_QLINK, "qlink", "vppu", "--transport", "hsb", "--params-file", s.file,
		      "--device", uri, "--count", "300", "--window", "4", "--cpu", "-1",
		      "--timeout", "30", (char *)NULL);
		_exit(127);
	}
	child = pid;
	{
		/* as CUDA-Q's test server forwards it: its whole command line */
		char *argv[] = { "cudaq_realtime_test_server",
				 "--transport=/somewhere/libcudaq-realtime-bridge-qlink.so",
				 unified ? "--dispatch=unified" : "--dispatch=ring",
				 "--timeout=30",
				 "--",
				 s.a_dev,
				 "--num-slots=4",
				 "--slot-size=256",
				 s.a_file,
				 unified ? "--unified" : "--port=0",
				 "--qp_config=whatever",
				 ring_caller ? "--progress=caller" :
				 ring_thread ? "--progress=thread" :
					       "--progress=auto",
				 NULL };

		assert_int_equal(bi->create(&h, 12, argv), QL_CUDAQ_OK);
	}
	assert_non_null(h);
	/* geometry and endpoint, valid from create */
	assert_int_equal(bi->get_ring_geometry(h, &n, &sz), QL_CUDAQ_OK);
	assert_int_equal(n, SLOTS);
	assert_int_equal(sz, STRIDE);
	assert_int_equal(bi->get_endpoint_info(h, ep, sizeof(ep)), QL_CUDAQ_OK);
	assert_non_null(strstr(ep, "transport=qlink-hsb "));
	assert_non_null(strstr(ep, s.a_dev + 2));
	snprintf(want, sizeof(want), " params_file=%s ", s.file);
	assert_non_null(strstr(ep, want));
	assert_non_null(strstr(ep, unified ? "shape=unified" : "shape=ring"));
	assert_non_null(strstr(ep, " rkey=0x"));
	assert_non_null(strstr(ep, " page_addr=0x0 page_size=256 pages=4 frame_len=128 "));
	assert_null(strstr(ep, "slots="));
	assert_null(strchr(ep, '\n'));
	/* the dispatcher, wired for the shape */
	d.num_slots = n;
	table_init(&d);
	assert_int_equal(bi->set_function_table(h, &d.table), QL_CUDAQ_OK);
	if (unified) {
		assert_int_equal(bi->get_transport_context(h, QL_CUDAQ_CTX_RING_BUFFER, &ring),
				 QL_CUDAQ_ERR_UNSUPPORTED);
		memset(&uctx, 0xa5, sizeof(uctx));
		assert_int_equal(bi->get_transport_context(h, QL_CUDAQ_CTX_UNIFIED, &uctx),
				 QL_CUDAQ_OK);
		assert_null(uctx.launch_fn);
		assert_null(uctx.transport_ctx);
		assert_int_equal(bi->get_cpu_dataplane(h, &d.dp), QL_CUDAQ_OK);
		assert_non_null(d.dp.ctx);
		assert_non_null(d.dp.rx_poll);
		assert_non_null(d.dp.tx_publish);
		ring = d.dp.ring;
		/* not connected yet: EMPTY at once, the slot left alone */
		assert_int_equal(d.dp.rx_poll(d.dp.ctx, &slot), QL_CUDAQ_RX_EMPTY);
		assert_int_equal(slot, 77);
		assert_int_equal(d.dp.tx_publish(d.dp.ctx, SLOTS), QL_CUDAQ_ERR_INVALID_ARG);
	} else {
		assert_int_equal(bi->get_transport_context(h, QL_CUDAQ_CTX_UNIFIED, &uctx),
				 QL_CUDAQ_ERR_UNSUPPORTED);
		assert_int_equal(bi->get_cpu_dataplane(h, &dp), QL_CUDAQ_ERR_UNSUPPORTED);
		assert_int_equal(bi->get_transport_context(h, QL_CUDAQ_CTX_RING_BUFFER, &d.ring),
				 QL_CUDAQ_OK);
		ring = d.ring;
	}
	/* a CPU provider: host views are the same addresses, strides set */
	assert_int_equal(ring.rx_stride_sz, STRIDE);
	assert_int_equal(ring.tx_stride_sz, STRIDE);
	assert_non_null(ring.rx_data);
	assert_non_null(ring.tx_data);
	assert_ptr_equal(ring.rx_flags, ring.rx_flags_host);
	assert_ptr_equal(ring.tx_flags, ring.tx_flags_host);
	assert_ptr_equal(ring.rx_data, ring.rx_data_host);
	assert_ptr_equal(ring.tx_data, ring.tx_data_host);
	for (uint32_t i = 0; i < SLOTS; i++) {
		assert_true(ring.rx_flags_host[i] == 0);
		assert_true(ring.tx_flags_host[i] == 0);
	}
	d.h = h;
	/* the pump's turn runs nothing before launch, nor in any other mode */
	assert_int_equal(progress_fn(h), 0);
	assert_int_equal(progress_fn(NULL), 0);
	assert_int_equal(pthread_create(&d.th, NULL, disp_main, &d), 0);
	/* READY would be printed here; connect waits for the QCS */
	assert_int_equal(bi->connect(h), QL_CUDAQ_OK);
	assert_int_equal(bi->connect(h), QL_CUDAQ_OK); /* idempotent */
	assert_int_equal(bi->launch(h), QL_CUDAQ_OK);
	rc = wait_child(pid, 60000);
	child = -1;
	__atomic_store_n(&d.shutdown, 1, __ATOMIC_RELEASE);
	pthread_join(d.th, NULL);
	assert_int_equal(rc, 0);
	assert_int_equal(d.bad, 0);
	/* every good request counted once, no drop counted */
	assert_int_equal(d.stats, kind == QCS_CLIENT ? N_COUNTED(unified) : VPPU_CALLS);
	/* the provider's account, printed at disconnect: every frame, every
	 * reply, and each refusal once */
	disconnect_capture(h, ep, sizeof(ep));
	if (kind == QCS_CLIENT) {
		uint32_t good = N_GOOD + (unified ? 0 : 1);

		snprintf(want, sizeof(want),
			 "qlink bridge: frames=%u replies=%u bad_frames=1 reply_too_big=1 "
			 "send_failed=0 tx_graph_errors=%d tx_bogus=%d refused=0 ",
			 good + 5 + (unified ? 0 : 2), good, !unified, !unified);
		if (!strstr(ep, want))
			fail_msg("disconnect said \"%s\", not \"%s\"", ep, want);
	}
	assert_int_equal(bi->disconnect(h), QL_CUDAQ_OK);
	assert_int_equal(bi->connect(h), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->destroy(h), QL_CUDAQ_OK);
	scratch_done(&s);
}

static void test_lifecycle_ring(void **state)
{
	(void)state;
	lifecycle(false, QCS_CLIENT);
}

static void test_lifecycle_unified(void **state)
{
	(void)state;
	lifecycle(true, QCS_CLIENT);
}

/* qlink's VPPU as the QCS (the laptop scenario), calls checked by the VPPU
 * (it exits non-zero on a wrong, lost or late answer) */
static void test_vppu_ring(void **state)
{
	(void)state;
	lifecycle(false, QCS_VPPU);
}

static void test_vppu_unified(void **state)
{
	(void)state;
	lifecycle(true, QCS_VPPU);
}

/* ---- the unified hooks on the hot path --------------------------------------- */

#define HOT_CALLS 200 /* every 10th a bad magic, dropped */

/* The QCS for the hot-path test (a forked child): HOT_CALLS calls, one at a
 * time, replies checked. */
static int hot_qcs(const char *file, const char *uri)
{
	struct ql_hsb_client_config cc = { 0 };
	struct qcs q = { .next_id = 1 };
	struct ql_conn_params cp;
	struct ql_hsb_params hp;
	struct ql_rdv r;
	uint8_t req[STRIDE], resp[STRIDE];
	int ret = 0;

	if (ql__rdv_init(&r, file) || ql__rdv_wait_server_hsb(&r, 30, rdv_idle, NULL, &hp))
		CHILD_FAIL(2, "no bridge parameters: %s", ql_error_detail());
	cc.recv_size = hp.resp_size;
	if (ql_device_open(uri, &q.dev) || ql_hsb_client_create(q.dev, &cc, &q.cl) ||
	    ql_hsb_client_local_params(q.cl, &cp) || ql__rdv_join(&r, &cp, 30, rdv_idle, NULL) ||
	    ql_hsb_client_connect(q.cl, &hp, NULL))
		CHILD_FAIL(3, "client: %s", ql_error_detail());
	for (int i = 0; i < HOT_CALLS && !ret; i++) {
		if (i % 10 == 9) {
			make_req(req, ql_rpc_fnv1a("rpc_increment"), 0, 16);
			put32(req, 0xdeadbeef);
			ret = dropped(&q, req, 40, "bad magic") ? 4 : 0;
		} else {
			ret = call(&q, 16) ? 5 : 0;
		}
	}
	(void)resp;
	ql__rdv_cleanup(&r);
	ql_hsb_client_destroy(q.cl);
	ql_device_close(q.dev);
	return ret;
}

struct hot {
	struct disp d;
	int frames; /* frames each run of the loop serves */
};

/* CUDA-Q's unified loop for `frames` requests: rx_poll, the handler,
 * tx_publish; a dropped request only released. */
static int hot_loop(void *arg)
{
	struct hot *x = arg;
	const ql_cudaq_ringbuffer_t *r = &x->d.dp.ring;

	for (int i = 0; i < x->frames; i++) {
		uint32_t slot = UINT32_MAX;
		long spins = 0;

		while (x->d.dp.rx_poll(x->d.dp.ctx, &slot) != QL_CUDAQ_RX_READY)
			if (++spins > 2000000000L)
				return 1;
		if (slot >= SLOTS)
			return 2;
		if (dispatch_one(&x->d, r->rx_data_host + (size_t)slot * r->rx_stride_sz,
				 r->tx_data_host + (size_t)slot * r->tx_stride_sz,
				 r->rx_stride_sz) &&
		    x->d.dp.tx_publish(x->d.dp.ctx, slot) != QL_CUDAQ_OK)
			return 3;
	}
	return 0;
}

static int hot_setup(void *arg)
{
	(void)arg;
	return 0;
}

/* The hooks allocate nothing and take no lock (interposition, this
 * process: half the calls), and make no system call (the other half, in a
 * forked copy of this process under seccomp, serving the same QCS). */
static void test_hotpath_unified(void **state)
{
	struct hot x = { .frames = HOT_CALLS / 2 };
	ql_cudaq_bridge_handle_t h;
	unsigned long allocs = 0, locks = 0;
	struct scratch s;
	char why[256] = "";
	pid_t pid;

	(void)state;
	scratch_init(&s);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(hot_qcs(s.file, s.uri_c));
	child = pid;
	{
		char *argv[] = { s.a_dev,	  s.a_file,	     "--unified",
				 "--num-slots=4", "--slot-size=256", NULL };

		assert_int_equal(bi->create(&h, 5, argv), QL_CUDAQ_OK);
	}
	x.d.unified = true;
	x.d.num_slots = SLOTS;
	table_init(&x.d);
	assert_int_equal(bi->get_cpu_dataplane(h, &x.d.dp), QL_CUDAQ_OK);
	/* the interposition sees the module's own allocations: it can fail */
	if (hp_available()) {
		hp_begin();
		assert_int_equal(bi->set_function_table(h, &x.d.table), QL_CUDAQ_OK);
		hp_end(&allocs, &locks);
		assert_true(allocs > 0);
	}
	assert_int_equal(bi->connect(h), QL_CUDAQ_OK);
	if (hp_available()) {
		hp_begin();
		assert_int_equal(hot_loop(&x), 0);
		hp_end(&allocs, &locks);
		assert_int_equal(allocs, 0);
		assert_int_equal(locks, 0);
	} else {
		assert_int_equal(hot_loop(&x), 0); /* ASan owns malloc: serve them plainly */
	}
	if (hp_run_strict(hot_setup, hot_loop, &x, why, sizeof(why)))
		fail_msg("%s", why);
	assert_int_equal(wait_child(pid, 60000), 0);
	child = -1;
	assert_int_equal(bi->disconnect(h), QL_CUDAQ_OK);
	assert_int_equal(bi->destroy(h), QL_CUDAQ_OK);
	scratch_done(&s);
}

/* ---- refusals --------------------------------------------------------------- */

static ql_cudaq_status_t create_with(struct scratch *s, ql_cudaq_bridge_handle_t *h, const char *a1,
				     const char *a2)
{
	char *argv[] = { s->a_dev, s->a_file, (char *)a1, (char *)a2, NULL };
	int argc = 2 + !!a1 + !!a2;

	*h = (void *)&argc; /* must be overwritten */
	return bi->create(h, argc, argv);
}

/*
 * Issue 22 item 7: a caller built against a CUDA-Q header from before
 * routing_key has 168-byte function-table entries. Its one-entry table is
 * put at the very end of a mapped page followed by a PROT_NONE page: a read
 * past the caller's array faults. Declared (--function-entry-size=168), it
 * is read at that stride and not a byte beyond; two old entries read as
 * 176-byte ones (nothing declared) are refused by name, before the read
 * runs past the array (it would fault here too).
 */
static void test_old_function_table(void **state)
{
	enum { OLD = 168 };
	long ps = sysconf(_SC_PAGESIZE);
	uint8_t *map, *arr;
	ql_cudaq_bridge_handle_t h;
	ql_cudaq_function_table_t t;
	struct scratch s;
	uint32_t id;

	(void)state;
	map = mmap(NULL, (size_t)ps * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		   0);
	assert_true(map != MAP_FAILED);
	assert_int_equal(mprotect(map + ps, (size_t)ps, PROT_NONE), 0);

	/* one old entry: HOST_CALL rpc_increment, id 0x191b6322, no args */
	arr = map + ps - OLD;
	memset(arr, 0, OLD);
	*(void **)(void *)arr = (void *)rpc_increment;
	id = 0x191b6322u;
	memcpy(arr + 8, &id, 4);
	arr[12] = QL_CUDAQ_DISPATCH_HOST_CALL;
	t.entries = (ql_cudaq_function_entry_t *)(void *)arr;
	t.count = 1;
	scratch_init(&s);
	assert_int_equal(create_with(&s, &h, "--function-entry-size=168", NULL), QL_CUDAQ_OK);
	assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_OK);
	assert_int_equal(bi->destroy(h), QL_CUDAQ_OK);

	/* two old entries; the second one's first argument descriptor has
	 * type 5: read at 176 bytes, entry 1's dispatch mode is that 5 */
	arr = map + ps - 2 * OLD;
	memset(arr, 0, 2 * OLD);
	for (int i = 0; i < 2; i++) {
		uint8_t *e = arr + i * OLD;

		*(void **)(void *)e = (void *)rpc_increment;
		id = 100u + (uint32_t)i;
		memcpy(e + 8, &id, 4);
		e[12] = QL_CUDAQ_DISPATCH_HOST_CALL;
		e[16] = 1; /* num_args */
		e[20] = 5; /* args[0].type_id */
		e[24] = 8; /* args[0].size_bytes */
		e[28] = 1; /* args[0].num_elements */
	}
	t.entries = (ql_cudaq_function_entry_t *)(void *)arr;
	t.count = 2;
	assert_int_equal(create_with(&s, &h, NULL, NULL), QL_CUDAQ_OK);
	assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->destroy(h), QL_CUDAQ_OK);
	assert_int_equal(create_with(&s, &h, "--function-entry-size=168", NULL), QL_CUDAQ_OK);
	assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_OK);
	assert_int_equal(bi->destroy(h), QL_CUDAQ_OK);

	/* and today's layout at a page end, as before */
	{
		ql_cudaq_function_entry_t *e =
			(ql_cudaq_function_entry_t *)(void *)(map + ps - sizeof(*e));

		memset(e, 0, sizeof(*e));
		e->handler.host_fn = rpc_increment;
		e->function_id = 7;
		e->dispatch_mode = QL_CUDAQ_DISPATCH_GRAPH_LAUNCH;
		e->routing_key = 42;
		t.entries = e;
		t.count = 1;
		assert_int_equal(create_with(&s, &h, NULL, NULL), QL_CUDAQ_OK);
		assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_OK);
		assert_int_equal(bi->destroy(h), QL_CUDAQ_OK);
	}
	scratch_done(&s);
	munmap(map, (size_t)ps * 2);
}

static void test_bad_args(void **state)
{
	static const char *const bad[] = {
		"--num-slots=0",
		"--num-slots=4097",
		"--num-slots=abc",
		"--num-slots=-1",
		"--num-slots=",
		"--slot-size=100",
		"--slot-size=64",
		"--slot-size=65664",
		"--slot-size=2x",
		"--resp-size=8",
		"--resp-size=4096",
		"--timeout=0",
		"--timeout=-3",
		"--timeout=soon",
		"--device=",
		"--params-file=",
		"--dispatch=ring", /* with --unified below */
		"--function-entry-size=172",
		"--function-entry-size=0",
		"--function-entry-size=184",
		"--progress=sometimes",
		"--progress=",
	};
	ql_cudaq_bridge_handle_t h;
	struct scratch s;
	char *argv[] = { "--num-slots=4", NULL };

	(void)state;
	scratch_init(&s);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *extra = !strcmp(bad[i], "--dispatch=ring") ? "--unified" : NULL;

		assert_int_equal(create_with(&s, &h, bad[i], extra), QL_CUDAQ_ERR_INVALID_ARG);
		assert_null(h);
	}
	/* no --params-file: nowhere for the QCS to find us */
	h = (void *)argv;
	assert_int_equal(bi->create(&h, 1, argv), QL_CUDAQ_ERR_INVALID_ARG);
	assert_null(h);
	assert_int_equal(bi->create(NULL, 1, argv), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->create(&h, 3, NULL), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->create(&h, -1, argv), QL_CUDAQ_ERR_INVALID_ARG);
	/* a device that does not exist: an unknown scheme, an RDMA device
	 * name (ibv://) this machine has not */
	{
		char *a[] = { "--device=nosuch://x", s.a_file, NULL };
		char *a2[] = { "--device=no_such_rdma_dev", s.a_file, NULL };

		assert_int_not_equal(bi->create(&h, 2, a), QL_CUDAQ_OK);
		assert_null(h);
		assert_int_not_equal(bi->create(&h, 2, a2), QL_CUDAQ_OK);
		assert_null(h);
	}
	/* a params file that exists already (a stale rendezvous) is refused */
	{
		FILE *f = fopen(s.file, "w");

		assert_non_null(f);
		fclose(f);
		assert_int_not_equal(create_with(&s, &h, NULL, NULL), QL_CUDAQ_OK);
		assert_null(h);
		assert_int_equal(unlink(s.file), 0);
	}
	/* unknown arguments are someone else's; the rest is accepted */
	assert_int_equal(create_with(&s, &h, "--frobnicate", "--resp-size=128"), QL_CUDAQ_OK);
	assert_non_null(h);
	assert_int_equal(bi->destroy(h), QL_CUDAQ_OK);
	scratch_done(&s);
}

static void test_refusals(void **state)
{
	ql_cudaq_function_entry_t e[2];
	ql_cudaq_function_table_t t = { .entries = e, .count = 1 };
	ql_cudaq_cpu_dataplane_t dp;
	ql_cudaq_ringbuffer_t ring;
	ql_cudaq_bridge_handle_t h, u;
	uint64_t not_ours[16] = { 0 };
	uint32_t n, sz, slot = 5;
	struct scratch s, su;
	uint64_t t0;
	char ep[512];

	(void)state;
	/* calls before create: a NULL handle, a handle create did not make */
	for (int k = 0; k < 2; k++) {
		void *x = k ? (void *)not_ours : NULL;

		assert_int_equal(bi->destroy(x), QL_CUDAQ_ERR_INVALID_ARG);
		assert_int_equal(bi->get_transport_context(x, QL_CUDAQ_CTX_RING_BUFFER, &ring),
				 QL_CUDAQ_ERR_INVALID_ARG);
		assert_int_equal(bi->connect(x), QL_CUDAQ_ERR_INVALID_ARG);
		assert_int_equal(bi->launch(x), QL_CUDAQ_ERR_INVALID_ARG);
		assert_int_equal(bi->disconnect(x), QL_CUDAQ_ERR_INVALID_ARG);
		assert_int_equal(bi->get_cpu_dataplane(x, &dp), QL_CUDAQ_ERR_INVALID_ARG);
		assert_int_equal(bi->get_endpoint_info(x, ep, sizeof(ep)),
				 QL_CUDAQ_ERR_INVALID_ARG);
		assert_int_equal(bi->get_ring_geometry(x, &n, &sz), QL_CUDAQ_ERR_INVALID_ARG);
		assert_int_equal(bi->set_function_table(x, &t), QL_CUDAQ_ERR_INVALID_ARG);
	}
	scratch_init(&s);
	assert_int_equal(create_with(&s, &h, "--num-slots=8", "--timeout=0.2"), QL_CUDAQ_OK);
	/* NULL outputs */
	assert_int_equal(bi->get_transport_context(h, QL_CUDAQ_CTX_RING_BUFFER, NULL),
			 QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->get_transport_context(h, (ql_cudaq_context_kind_t)7, &ring),
			 QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->get_cpu_dataplane(h, NULL), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->get_endpoint_info(h, NULL, 64), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->get_endpoint_info(h, ep, 0), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->get_endpoint_info(h, ep, 16), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->get_ring_geometry(h, NULL, &sz), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->get_ring_geometry(h, &n, NULL), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->get_ring_geometry(h, &n, &sz), QL_CUDAQ_OK);
	assert_int_equal(n, 8);
	assert_int_equal(sz, 384); /* the hsb default page */
	/* the ring shape refuses the unified one */
	assert_int_equal(bi->get_cpu_dataplane(h, &dp), QL_CUDAQ_ERR_UNSUPPORTED);
	/* function tables: empty, NULL, malformed */
	memset(e, 0, sizeof(e));
	e[0].function_id = 1;
	e[0].dispatch_mode = QL_CUDAQ_DISPATCH_HOST_CALL;
	e[1] = e[0];
	assert_int_equal(bi->set_function_table(h, NULL), QL_CUDAQ_ERR_INVALID_ARG);
	t.count = 0;
	assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_ERR_INVALID_ARG);
	t.count = 1;
	t.entries = NULL;
	assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_ERR_INVALID_ARG);
	t.entries = e;
	t.count = 2; /* the same function_id twice */
	assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_ERR_INVALID_ARG);
	e[1].function_id = 2;
	e[1].dispatch_mode = 3;
	assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_ERR_INVALID_ARG);
	e[1].dispatch_mode = QL_CUDAQ_DISPATCH_GRAPH_LAUNCH;
	e[1].schema.num_args = 9;
	assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_ERR_INVALID_ARG);
	e[1].schema.num_args = 8;
	assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_OK);
	assert_int_equal(bi->set_function_table(h, &t), QL_CUDAQ_OK); /* replaces */
	/* out of order: launch before connect; connect with no QCS times out */
	assert_int_equal(bi->launch(h), QL_CUDAQ_ERR_INVALID_ARG);
	t0 = now_ms();
	assert_int_equal(bi->connect(h), QL_CUDAQ_ERR_INTERNAL);
	assert_true(now_ms() - t0 < 5000);
	assert_int_equal(bi->launch(h), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->disconnect(h), QL_CUDAQ_OK);
	assert_int_equal(bi->connect(h), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->destroy(h), QL_CUDAQ_OK);
	scratch_done(&s);

	/* the unified shape refuses the ring one; its hooks check their input */
	scratch_init(&su);
	assert_int_equal(create_with(&su, &u, "--unified", "--num-slots=2"), QL_CUDAQ_OK);
	assert_int_equal(bi->get_transport_context(u, QL_CUDAQ_CTX_RING_BUFFER, &ring),
			 QL_CUDAQ_ERR_UNSUPPORTED);
	assert_int_equal(bi->get_cpu_dataplane(u, &dp), QL_CUDAQ_OK);
	assert_int_equal(dp.rx_poll(dp.ctx, NULL), QL_CUDAQ_RX_EMPTY);
	assert_int_equal(dp.rx_poll(NULL, &slot), QL_CUDAQ_RX_EMPTY);
	assert_int_equal(slot, 5);
	assert_int_equal(dp.tx_publish(NULL, 0), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(dp.tx_publish(dp.ctx, 0), QL_CUDAQ_ERR_INVALID_ARG); /* not connected */
	assert_int_equal(dp.tx_publish(dp.ctx, 2), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(dp.tx_publish(dp.ctx, UINT32_MAX), QL_CUDAQ_ERR_INVALID_ARG);
	assert_int_equal(bi->launch(u), QL_CUDAQ_ERR_INVALID_ARG);
	/* destroy without connect or disconnect cleans up too */
	assert_int_equal(bi->destroy(u), QL_CUDAQ_OK);
	scratch_done(&su);
}

static int kill_child(void **state)
{
	(void)state;
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = -1;
	}
	return 0;
}

/* ---- the ring shape's pump on an oversubscribed host (docs/progress.md §11) ---- */

/* The bridge decides its pump at create, by the shared rule on the affinity
 * mask of the creating thread: the endpoint line names it (pump=...). */
static void pump_is(const cpu_set_t *mask, const char *arg, bool unified, const char *want)
{
	ql_cudaq_bridge_handle_t h;
	struct scratch s;
	char ep[512];

	scratch_init(&s);
	assert_int_equal(sched_setaffinity(0, sizeof(*mask), mask), 0);
	assert_int_equal(create_with(&s, &h, arg, unified ? "--unified" : "--dispatch=ring"),
			 QL_CUDAQ_OK);
	assert_int_equal(bi->get_endpoint_info(h, ep, sizeof(ep)), QL_CUDAQ_OK);
	if (!strstr(ep, want))
		fail_msg("%s on %d CPUs: \"%s\" has no \"%s\"", arg, CPU_COUNT(mask), ep, want);
	assert_int_equal(bi->destroy(h), QL_CUDAQ_OK);
	scratch_done(&s);
}

/* the first n CPUs of the process's mask */
static void first_cpus(cpu_set_t *out, int n)
{
	CPU_ZERO(out);
	for (int c = 0; c < CPU_SETSIZE && n > 0; c++)
		if (CPU_ISSET(c, &all_cpus)) {
			CPU_SET(c, out);
			n--;
		}
}

/* Fewer free cores than spinning threads (1 or 2 CPUs: the dispatcher's
 * loop and the QCS take them): the default pump naps; with a core to spare
 * (3 CPUs: one free, for the pump) it spins; an explicit --progress is
 * obeyed. */
static void test_pump_decision(void **state)
{
	int n = CPU_COUNT(&all_cpus);
	cpu_set_t m;

	(void)state;
	first_cpus(&m, 1);
	pump_is(&m, "--progress=auto", false, " pump=nap ");
	pump_is(&m, "--timeout=30", false, " pump=nap "); /* no --progress: auto */
	pump_is(&m, "--progress=thread", false, " pump=spin ");
	pump_is(&m, "--progress=caller", false, " pump=caller ");
	pump_is(&m, "--progress=auto", true, " pump=none ");
	if (n >= 2) {
		first_cpus(&m, 2);
		pump_is(&m, "--progress=auto", false, " pump=nap ");
	}
	if (n >= 3) {
		first_cpus(&m, 3);
		pump_is(&m, "--progress=auto", false, " pump=spin ");
	} else {
		print_message("only %d CPUs: the 3-CPU decision (spin) not checked here\n", n);
	}
	assert_int_equal(sched_setaffinity(0, sizeof(all_cpus), &all_cpus), 0);
}

/* Every thread on one CPU: this process's dispatcher loop (pausing, never
 * yielding, as CUDA-Q's), the pump, and the QCS (`qlink vppu`, spinning on
 * its receive CQ). With default options the ring shape answers
 * PINNED_CALLS calls one at a time within PINNED_MS. A spinning pump took
 * about 8.7 s for 1000 such calls here (each hop waits for a scheduler
 * slice); the napping one 0.15 s. A behaviour bound, not a benchmark. */
#define PINNED_CALLS 2000
#define PINNED_MS 6000

static void test_pinned_ring(void **state)
{
	struct disp d = { .pause_only = true };
	ql_cudaq_bridge_handle_t h = NULL;
	struct scratch s;
	char ep[512], calls[16];
	cpu_set_t one;
	uint64_t t0;
	pid_t pid;
	int rc;

	(void)state;
	first_cpus(&one, 1);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0); /* the QCS inherits it */
	scratch_init(&s);
	snprintf(calls, sizeof(calls), "%d", PINNED_CALLS);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl(QL_TEST_QLINK, "qlink", "vppu", "--transport", "hsb", "--params-file", s.file,
		      "--device", s.uri_c, "--count", calls, "--window", "1", "--cpu", "-1",
		      "--timeout", "30", (char *)NULL);
		_exit(127);
	}
	child = pid;
	{
		char *argv[] = { s.a_dev,	    s.a_file,	       "--num-slots=4",
				 "--slot-size=256", "--dispatch=ring", NULL }; /* default options */

		assert_int_equal(bi->create(&h, 5, argv), QL_CUDAQ_OK);
	}
	assert_int_equal(bi->get_endpoint_info(h, ep, sizeof(ep)), QL_CUDAQ_OK);
	assert_non_null(strstr(ep, " pump=nap "));
	d.num_slots = SLOTS;
	table_init(&d);
	assert_int_equal(bi->set_function_table(h, &d.table), QL_CUDAQ_OK);
	assert_int_equal(bi->get_transport_context(h, QL_CUDAQ_CTX_RING_BUFFER, &d.ring),
			 QL_CUDAQ_OK);
	assert_int_equal(pthread_create(&d.th, NULL, disp_main, &d), 0);
	assert_int_equal(bi->connect(h), QL_CUDAQ_OK);
	assert_int_equal(bi->launch(h), QL_CUDAQ_OK);
	t0 = now_ms();
	rc = wait_child(pid, PINNED_MS);
	child = -1;
	__atomic_store_n(&d.shutdown, 1, __ATOMIC_RELEASE);
	pthread_join(d.th, NULL);
	if (rc)
		fail_msg("%d calls on one CPU: the QCS %s after %" PRIu64 " ms (%" PRIu64
			 " dispatched)",
			 PINNED_CALLS, rc < 0 ? "was still waiting" : "failed", now_ms() - t0,
			 d.stats);
	assert_int_equal(d.bad, 0);
	assert_int_equal(d.stats, PINNED_CALLS);
	print_message("%d calls on one CPU in %" PRIu64 " ms\n", PINNED_CALLS, now_ms() - t0);
	assert_int_equal(bi->disconnect(h), QL_CUDAQ_OK);
	assert_int_equal(bi->destroy(h), QL_CUDAQ_OK);
	scratch_done(&s);
	assert_int_equal(sched_setaffinity(0, sizeof(all_cpus), &all_cpus), 0);
}

static int restore_cpus(void **state)
{
	kill_child(state);
	sched_setaffinity(0, sizeof(all_cpus), &all_cpus);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_abi_layout),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_old_function_table),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test_teardown(test_lifecycle_ring, kill_child),
		cmocka_unit_test_teardown(test_lifecycle_unified, kill_child),
		cmocka_unit_test_teardown(test_vppu_ring, kill_child),
		cmocka_unit_test_teardown(test_vppu_unified, kill_child),
		cmocka_unit_test_teardown(test_hotpath_unified, kill_child),
		cmocka_unit_test_teardown(test_pump_decision, restore_cpus),
		cmocka_unit_test_teardown(test_pinned_ring, restore_cpus),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
