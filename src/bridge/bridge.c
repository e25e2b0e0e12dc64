/* SPDX-License-Identifier: MIT */
/*
 * libcudaq-realtime-bridge-qlink.so: a CUDA-Q Realtime bridge provider
 * (interface version 3, cudaq_bridge_abi.h) that carries CUDA-Q's host
 * dispatcher over qlink's hsb transport on any qlink device: soft+shm (a
 * laptop, the VPPU as the QCS), ibv (a ConnectX or rxe). docs/cudaq-bridge.md
 * is the specification.
 *
 * Why the hsb channel: a QCS writes each request into page = slot x stride
 * of a region registered at iova 0 (a board: WRITEs of the frame, then its
 * metadata by WRITE WITH IMMEDIATE at slot x stride + round_up(frame, 128),
 * immediate = slot | PSN << 12; CUDA-Q's emulator: the frame itself with
 * immediate = slot), which is exactly CUDA-Q's RX ring (rx_data + slot x
 * stride). So the channel's pages are handed to CUDA-Q as rx_data and
 * nothing is copied on the way in; the channel keeps its checks (page =
 * imm & 0xFFF in range, a page written again before it was given back),
 * hands on frame_len bytes (stride - 128: the frame and its metadata fill
 * the slot) and keeps its receive-WQE credits. Replies are written by CUDA-Q into our
 * own TX slots and copied (header + result, at most resp_size bytes) into a
 * response buffer of the channel, which SENDs it: the channel's SEND pool is
 * registered memory and its completions return the buffers.
 *
 * The channel is driven by one thread at a time (a soft or ibv QP and its
 * CQs are): the pump thread in the ring shape, the dispatcher's own thread
 * (through rx_poll/tx_publish) in the unified shape, after connect()
 * published the connected state with a release store.
 *
 * A received page is given back to the channel (its receive WQE re-posted)
 * only when CUDA-Q is done with the request in it, and before its reply is
 * posted (a QCS may write the page again as soon as it has the reply): ring
 * shape, once the dispatcher retired the slot (rx_flags[slot] 0) and its tx
 * flag says the reply is ready or there is none (not a graph in flight);
 * unified shape, in tx_publish(slot), or at the next rx_poll when the
 * dispatcher dropped the request (tx_flags[slot] still 0: no reply, no graph
 * in flight).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "bridge/cudaq_bridge_abi.h"
#include "providers/common/progress.h"
#include "qlink/channel.h"
#include "qlink/error.h"
#include "qlink/hsb.h"
#include "qlink/verbs.h"
#include "transport/hsb_pages.h"
#include "transport/rendezvous.h"

#define QB_MAGIC 0x716c6272u /* "qlbr": a handle this library made */
#define QB_BURST 32
#define QB_HDR 24u		   /* RPCHeader / RPCResponse */
#define QB_IDLE_YIELD 1024	   /* idle pump turns before it yields the core */
#define QB_NAP_NS 10000L	   /* a napping pump's sleep after an empty turn */
#define QB_NAP_SPIN 32		   /* and the empty turns it spins first, after work */
#define QB_NAP_SLACK_NS 1000UL	   /* and its timer slack (the default: 50 us) */
#define QB_TX_WAIT 10000000u	   /* tx_publish: turns waiting for a free buffer */
#define QB_MAX_FUNCTIONS 65536u	   /* set_function_table: entries at most */
#define QB_DEFAULT_TIMEOUT 60.0	   /* connect: seconds to wait for the QCS */
#define QB_PREFIX "qlink bridge: " /* every message on stderr */

#if defined(__x86_64__) || defined(__i386__)
#define qb_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define qb_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define qb_relax() __asm__ __volatile__("" ::: "memory")
#endif

enum qb_state { QB_CREATED, QB_CONNECTED, QB_DISCONNECTED };

/* Who runs the ring shape's pump (docs/progress.md §11). */
enum qb_pump {
	QB_PUMP_NONE,	/* the unified shape: the dispatcher's own calls */
	QB_PUMP_SPIN,	/* a thread that spins (--progress=thread; auto with cores to spare) */
	QB_PUMP_NAP,	/* a thread that sleeps after each empty turn (auto, oversubscribed) */
	QB_PUMP_CALLER, /* qlink_cudaq_bridge_progress (--progress=caller) */
};

static const char *const pump_names[] = { "none", "spin", "nap", "caller" };

/* What the transport refused or could not do (printed at disconnect). */
struct qb_counts {
	uint64_t frames;	/* requests handed to CUDA-Q */
	uint64_t bad_frames;	/* shorter than their header says: magic cleared */
	uint64_t replies;	/* SENDs posted */
	uint64_t reply_too_big; /* 24 + result_len above the stride or resp_size */
	uint64_t send_failed;	/* the channel refused a SEND */
	uint64_t tx_graph_err;	/* tx flag 0xDEAD<<48 | code: cleared, nothing sent */
	uint64_t tx_bogus;	/* tx flag neither 0, a marker nor the slot's address */
	uint64_t refused;	/* a page the channel handed over twice (never) */
};

struct qb {
	uint32_t magic;
	/* the arguments */
	char uri[QL_DEVICE_URI_MAX];
	char params_file[4090]; /* room for ".client" in ql_rdv */
	uint32_t num_slots, stride, resp_size;
	/* --function-entry-size: sizeof(cudaq_function_entry_t) in the header
	 * the caller was built with (the table itself says nothing of it) */
	uint32_t entry_size;
	double timeout;
	bool unified;
	/* the transport */
	struct ql_device *dev;
	struct ql_channel *ch;
	struct ql_hsb_params hp;
	struct ql_rdv rdv;
	enum qb_state state;
	int connected; /* atomic: the data path may run */
	/* the ring CUDA-Q sees */
	uint8_t *rx_data; /* the channel's pages */
	uint8_t *tx_data;
	uint64_t *rx_flags, *tx_flags;
	/* slots handed to CUDA-Q and not given back, in arrival order */
	struct ql_buffer **held; /* per slot: its page's buffer, or NULL */
	uint32_t *open;		 /* a FIFO of num_slots: entry k at open[(open_head + k) % N] */
	uint32_t open_head, nopen;
	/* unified: received, not yet claimed by rx_poll */
	struct ql_buffer *rxq[QB_BURST];
	int rxq_head, rxq_n;
	/* ring shape: the pump, a thread (spinning or napping) or the turns
	 * of qlink_cudaq_bridge_progress (progress caller) */
	pthread_t pump;
	bool pump_started;
	enum qb_pump pump_mode;
	int running; /* atomic */
	/* set_function_table: kept for the record (the dispatcher owns dispatch) */
	ql_cudaq_function_entry_t *table;
	uint32_t table_count;
	int chan_err; /* the channel's error once it failed (peer gone) */
	struct qb_counts n;
};

static struct qb *qb_of(ql_cudaq_bridge_handle_t h)
{
	struct qb *b = h;

	return b && b->magic == QB_MAGIC ? b : NULL;
}

static ql_cudaq_status_t qb_fail(ql_cudaq_status_t st, const char *what)
{
	fprintf(stderr, QB_PREFIX "%s\n", what);
	return st;
}

/* ---- arguments -------------------------------------------------------------- */

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	if (!*s)
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v > 0) || v > 86400)
		return -1;
	*out = v;
	return 0;
}

static bool arg_is(const char *a, const char *key, const char **val)
{
	size_t n = strlen(key);

	if (strncmp(a, key, n))
		return false;
	*val = a + n;
	return true;
}

static ql_cudaq_status_t bad_arg(const char *a, const char *why)
{
	fprintf(stderr, QB_PREFIX "%s: %s\n", a, why);
	return QL_CUDAQ_ERR_INVALID_ARG;
}

/* Our arguments from the whole list; anything else is someone else's. */
static ql_cudaq_status_t parse_args(struct qb *b, int argc, char **argv)
{
	enum ql__progress_mode progress = QL__PROGRESS_AUTO;
	bool dispatch_ring = false;
	uint32_t resp_size = 0;
	const char *v;

	snprintf(b->uri, sizeof(b->uri), "soft+shm://qlink-bridge-%d", (int)getpid());
	b->num_slots = QL_HSB_DEFAULT_PAGES;
	b->stride = QL_HSB_DEFAULT_PAGE_SIZE;
	b->timeout = QB_DEFAULT_TIMEOUT;
	b->entry_size = QL_CUDAQ_ENTRY_SIZE;
	if (argc < 0 || (argc > 0 && !argv))
		return bad_arg("create", "argc/argv inconsistent");
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!a)
			continue;
		if (arg_is(a, "--device=", &v)) {
			/* a bare RDMA device name, as CUDA-Q's RoCE providers take
			 * it (--device=mlx5_0), is the ibv device of that name */
			bool bare = !strstr(v, "://");

			if (!*v || strlen(v) + (bare ? 6 : 0) >= sizeof(b->uri))
				return bad_arg(a, "a qlink device URI (e.g. soft+shm://NAME, "
						  "ibv://mlx5_0) or an RDMA device name");
			snprintf(b->uri, sizeof(b->uri), "%s%s", bare ? "ibv://" : "", v);
		} else if (arg_is(a, "--num-slots=", &v)) {
			if (parse_u32(v, 1, QL_HSB_MAX_PAGES, &b->num_slots))
				return bad_arg(a, "slots: 1..4096");
		} else if (arg_is(a, "--slot-size=", &v)) {
			if (parse_u32(v, 2 * QL_HSB_PAGE_UNIT, QL_HSB_MAX_PAGE_SIZE, &b->stride) ||
			    b->stride % QL_HSB_PAGE_UNIT)
				return bad_arg(a, "the slot stride is an hsb page: a multiple of "
						  "128 in 256..65536 (a frame and its 128 bytes "
						  "of metadata)");
		} else if (arg_is(a, "--resp-size=", &v)) {
			if (parse_u32(v, QB_HDR, QL_HSB_MAX_PAGE_SIZE, &resp_size))
				return bad_arg(a, "the QCS's receive buffer size: 24..65536");
		} else if (!strcmp(a, "--unified") || !strcmp(a, "--dispatch=unified")) {
			b->unified = true;
		} else if (!strcmp(a, "--dispatch=ring")) {
			dispatch_ring = true;
		} else if (arg_is(a, "--params-file=", &v)) {
			if (!*v || strlen(v) >= sizeof(b->params_file))
				return bad_arg(a, "a path (of at most 4089 bytes)");
			snprintf(b->params_file, sizeof(b->params_file), "%s", v);
		} else if (arg_is(a, "--function-entry-size=", &v)) {
			if (parse_u32(v, QL_CUDAQ_ENTRY_SIZE_V3_0, QL_CUDAQ_ENTRY_SIZE,
				      &b->entry_size) ||
			    (b->entry_size != QL_CUDAQ_ENTRY_SIZE_V3_0 &&
			     b->entry_size != QL_CUDAQ_ENTRY_SIZE))
				return bad_arg(a, "sizeof(cudaq_function_entry_t) in the caller's "
						  "CUDA-Q header: 176 (with routing_key) or 168 "
						  "(before it)");
		} else if (arg_is(a, "--progress=", &v)) {
			if (ql__progress_parse(v, &progress))
				return bad_arg(a, "thread, caller or auto");
		} else if (arg_is(a, "--timeout=", &v)) {
			if (parse_seconds(v, &b->timeout))
				return bad_arg(a, "seconds, above 0 and at most 86400");
		}
	}
	if (b->unified && dispatch_ring)
		return bad_arg("--unified", "contradicts --dispatch=ring");
	/* the ring shape's pump: CUDA-Q's ring loop never calls the provider,
	 * so only a program that runs its own loop and calls
	 * qlink_cudaq_bridge_progress can drive it (--progress=caller); else a
	 * thread, which spins (--progress=thread, or auto with cores to spare)
	 * or, where the shared rule says the process has fewer free cores than
	 * spinning threads (its "caller"), naps after each empty turn so that
	 * the dispatcher and the QCS keep the CPUs. QLINK_PROGRESS is not
	 * consulted: its caller would leave CUDA-Q's ring without a pump
	 * (docs/progress.md §11). Decided once, here. */
	if (b->unified)
		b->pump_mode = QB_PUMP_NONE;
	else if (progress == QL__PROGRESS_CALLER)
		b->pump_mode = QB_PUMP_CALLER;
	else if (progress == QL__PROGRESS_AUTO && ql__progress_auto_caller(1))
		b->pump_mode = QB_PUMP_NAP;
	else
		b->pump_mode = QB_PUMP_SPIN;
	if (!b->params_file[0])
		return bad_arg("create", "--params-file=FILE is required: the QCS (qlink vppu "
					 "--transport hsb --params-file FILE) takes the bridge's "
					 "parameters from FILE");
	b->resp_size = resp_size ? resp_size : b->stride;
	if (b->resp_size > b->stride)
		return bad_arg("--resp-size", "larger than --slot-size (no reply is larger "
					      "than a slot)");
	return QL_CUDAQ_OK;
}

/* ---- the data path (no allocation, lock, syscall or message) ---------------- */

static inline uint8_t *rx_slot(const struct qb *b, uint32_t s)
{
	return b->rx_data + (size_t)s * b->stride;
}

static inline uint8_t *tx_slot(const struct qb *b, uint32_t s)
{
	return b->tx_data + (size_t)s * b->stride;
}

/* A frame arrived in page s: zero the rest of the page (as CUDA-Q's UDP
 * transport zero-fills short datagrams), and make a frame shorter than its
 * header claims unusable by clearing its magic, so that the dispatcher
 * drops it in ring order instead of a handler reading past what came.
 * false: not ours to hand on (the channel never gives a page twice before
 * it is back, nor one past the ring; checked all the same, since open
 * holds one entry per slot). */
static inline bool take_frame(struct qb *b, struct ql_buffer *buf)
{
	uint32_t s = buf->index, len = buf->len, arg_len;
	uint8_t *p;

	if (s >= b->num_slots || b->held[s] || b->nopen >= b->num_slots || len > b->stride) {
		ql_channel_release_buffer(b->ch, buf);
		b->n.refused++;
		return false;
	}
	p = rx_slot(b, s);

	if (len < b->stride)
		memset(p + len, 0, b->stride - len);
	memcpy(&arg_len, p + 8, sizeof(arg_len));
	arg_len = le32toh(arg_len);
	if (len < QB_HDR || arg_len > len - QB_HDR) {
		memset(p, 0, 4);
		b->n.bad_frames++;
	}
	b->held[s] = buf;
	b->open[(b->open_head + b->nopen++) % b->num_slots] = s;
	b->n.frames++;
	return true;
}

/* Entry k of the FIFO of slots handed to CUDA-Q. */
static inline uint32_t open_at(const struct qb *b, uint32_t k)
{
	return b->open[(b->open_head + k) % b->num_slots];
}

/* Give the page of entry k back to the channel. The oldest (the ring
 * shape) and the newest (the unified shape's usual case) leave in O(1). */
static inline void give_back(struct qb *b, uint32_t k)
{
	uint32_t s = open_at(b, k), n = b->num_slots;

	ql_channel_release_buffer(b->ch, b->held[s]);
	b->held[s] = NULL;
	if (k == 0) {
		b->open_head = (b->open_head + 1) % n;
	} else {
		for (uint32_t j = k; j + 1 < b->nopen; j++)
			b->open[(b->open_head + j) % n] = b->open[(b->open_head + j + 1) % n];
	}
	b->nopen--;
}

/* The reply in TX slot s into a response buffer: *out, or NULL with 0 (not
 * sendable: counted, dropped) or -EAGAIN (no free buffer yet). */
static inline int reply_buffer(struct qb *b, uint32_t s, struct ql_buffer **out)
{
	const uint8_t *src = tx_slot(b, s);
	struct ql_buffer *buf;
	uint32_t result_len;
	uint64_t len;
	uint8_t *dst;

	*out = NULL;
	memcpy(&result_len, src + 8, sizeof(result_len));
	len = (uint64_t)QB_HDR + le32toh(result_len);
	if (len > b->stride || len > b->resp_size) {
		b->n.reply_too_big++;
		return 0;
	}
	buf = ql_channel_acquire_buffer(b->ch);
	if (!buf)
		return -EAGAIN;
	dst = ql_buffer_append(buf, (uint32_t)len);
	if (!dst) {
		ql_channel_release_buffer(b->ch, buf);
		b->n.reply_too_big++;
		return 0;
	}
	memcpy(dst, src, (size_t)len);
	*out = buf;
	return 0;
}

static inline void send_replies(struct qb *b, struct ql_buffer **bufs, int n)
{
	int k;

	if (!n)
		return;
	k = ql_channel_send_burst(b->ch, bufs, n);
	if (k < 0)
		k = 0;
	b->n.replies += (uint64_t)k;
	for (int i = k; i < n; i++) {
		ql_channel_release_buffer(b->ch, bufs[i]);
		b->n.send_failed++;
	}
}

static inline void note_channel_error(struct qb *b, int err)
{
	if (err < 0 && !b->chan_err)
		b->chan_err = err;
}

/* Ring shape: replies CUDA-Q published, slots it is done with, in arrival
 * order. A slot is looked at once the dispatcher retired it (rx_flags 0):
 * it stores the reply's tx flag before it clears rx, so the tx flag read
 * after is final, and the page can go back to the channel before the reply
 * leaves (the QCS may write the page again as soon as it has the reply; a
 * page not yet given back would be refused). Replies leave in request order
 * (a QCS matches them as a FIFO, as the hsb client does): a slot not yet
 * retired, or whose graph is still running (the in-flight marker), holds
 * back the later ones; a dropped request (retired, no reply) does not. */
static bool ring_service(struct qb *b)
{
	struct ql_buffer *out[QB_BURST];
	int nout = 0;
	bool busy = false;

	while (b->nopen) {
		uint32_t s = open_at(b, 0);
		uint64_t tx;

		if (__atomic_load_n(&b->rx_flags[s], __ATOMIC_ACQUIRE))
			break; /* still being served */
		tx = __atomic_load_n(&b->tx_flags[s], __ATOMIC_ACQUIRE);
		if (tx == QL_CUDAQ_TX_IN_FLIGHT)
			break;
		if (tx) {
			if (tx == (uint64_t)(uintptr_t)tx_slot(b, s)) {
				struct ql_buffer *buf;

				if (nout == QB_BURST || reply_buffer(b, s, &buf) == -EAGAIN)
					break; /* next turn */
				if (buf)
					out[nout++] = buf;
			} else if (QL_CUDAQ_TX_IS_ERROR(tx)) {
				b->n.tx_graph_err++;
			} else {
				b->n.tx_bogus++;
			}
			__atomic_store_n(&b->tx_flags[s], 0, __ATOMIC_RELEASE);
		}
		give_back(b, 0);
		busy = true;
	}
	send_replies(b, out, nout);
	return busy;
}

/* One turn of the ring shape's pump: the frames received, flagged to
 * CUDA-Q; the slots it retired, answered. true when anything moved. */
static bool pump_turn(struct qb *b)
{
	struct ql_buffer *in[QB_BURST];
	int n = ql_channel_receive_burst(b->ch, in, QB_BURST);
	bool busy = n > 0;

	note_channel_error(b, n);
	for (int i = 0; i < n; i++) {
		uint32_t s = in[i]->index;

		if (!take_frame(b, in[i]))
			continue;
		/* the bytes, then the flag (address-as-flag, release) */
		__atomic_store_n(&b->rx_flags[s], (uint64_t)(uintptr_t)rx_slot(b, s),
				 __ATOMIC_RELEASE);
	}
	if (b->nopen && ring_service(b))
		busy = true;
	return busy;
}

/* The pump thread. Spinning, it yields only after QB_IDLE_YIELD empty
 * turns. Napping (an oversubscribed host: CUDA-Q's ring loop and the QCS
 * spin too, and neither ever yields), it sleeps QB_NAP_NS after an empty
 * turn: a yield would hand the core to a spinner for a whole scheduler
 * slice, and a spinning pump takes a third of two cores from the two
 * threads it serves; a short sleep lets the scheduler's wakeup preemption
 * run the next turn within tens of microseconds. After a turn that moved
 * something it first spins QB_NAP_SPIN empty turns: a dispatcher running
 * on the other CPU retires the slot within a microsecond or two, and its
 * reply leaves in the same wake. Shorter naps (5 us here) cost the pump its
 * wakeup preemption: waking more often, it runs more than its share and
 * waits for scheduler slices again (docs/progress.md §11). */
static void *pump_main(void *arg)
{
	struct qb *b = arg;
	const struct timespec nap = { 0, QB_NAP_NS };
	bool napping = b->pump_mode == QB_PUMP_NAP;
	unsigned int idle = 0;

	pthread_setname_np(pthread_self(), napping ? "qlink-pump-nap" : "qlink-pump");
	if (napping)
		prctl(PR_SET_TIMERSLACK, QB_NAP_SLACK_NS, 0, 0, 0);
	while (__atomic_load_n(&b->running, __ATOMIC_ACQUIRE)) {
		if (pump_turn(b)) {
			idle = 0;
		} else if (napping) {
			if (idle < QB_NAP_SPIN) {
				idle++;
				qb_relax();
			} else {
				nanosleep(&nap, NULL);
			}
		} else if (++idle >= QB_IDLE_YIELD) {
			sched_yield(); /* idle only: give a shared core back */
		} else {
			qb_relax();
		}
	}
	return NULL;
}

/* qlink's extension (cudaq_bridge_abi.h): the pump's turn in the caller,
 * ring shape with progress caller, between launch and disconnect, from the
 * one thread that runs the dispatcher's loop. */
__attribute__((visibility("default"))) int qlink_cudaq_bridge_progress(ql_cudaq_bridge_handle_t h)
{
	struct qb *b = h;

	if (!b || b->magic != QB_MAGIC || b->pump_mode != QB_PUMP_CALLER ||
	    !__atomic_load_n(&b->running, __ATOMIC_ACQUIRE))
		return 0;
	return pump_turn(b);
}

/* Unified shape, rx_poll: never blocks. */
static ql_cudaq_rx_status_t qb_rx_poll(void *ctx, uint32_t *out_slot)
{
	struct qb *b = ctx;
	struct ql_buffer *buf;

	if (!b || !out_slot || !__atomic_load_n(&b->connected, __ATOMIC_ACQUIRE))
		return QL_CUDAQ_RX_EMPTY;
	/* slots the dispatcher dropped since (no reply published, no graph
	 * running for them): the loop is single-threaded, so any slot claimed
	 * before this call has been dealt with */
	for (uint32_t i = 0; i < b->nopen;) {
		if (!__atomic_load_n(&b->tx_flags[open_at(b, i)], __ATOMIC_ACQUIRE))
			give_back(b, i);
		else
			i++;
	}
	if (!b->rxq_n) {
		int n = ql_channel_receive_burst(b->ch, b->rxq, QB_BURST);

		if (n <= 0) {
			note_channel_error(b, n);
			return QL_CUDAQ_RX_EMPTY;
		}
		b->rxq_head = 0;
		b->rxq_n = n;
	}
	buf = b->rxq[b->rxq_head++];
	b->rxq_n--;
	if (!take_frame(b, buf))
		return QL_CUDAQ_RX_EMPTY;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	*out_slot = buf->index;
	return QL_CUDAQ_RX_READY;
}

/* Unified shape, tx_publish: give the request's page back, then send TX
 * slot `slot`. In that order: the QCS may write the page again as soon as
 * it has the reply (its window), and the channel refuses a frame into a
 * page it has not had back (page_busy). */
static ql_cudaq_status_t qb_tx_publish(void *ctx, uint32_t slot)
{
	struct qb *b = ctx;
	struct ql_buffer *buf;
	ql_cudaq_status_t st = QL_CUDAQ_OK;
	uint32_t spins = 0;

	if (!b || slot >= b->num_slots || !__atomic_load_n(&b->connected, __ATOMIC_ACQUIRE))
		return QL_CUDAQ_ERR_INVALID_ARG;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (b->held[slot]) {
		for (uint32_t i = b->nopen; i-- > 0;) { /* newest first */
			if (open_at(b, i) == slot) {
				give_back(b, i);
				break;
			}
		}
	}
	while (reply_buffer(b, slot, &buf) == -EAGAIN) {
		int err = ql_channel_poll_errors(b->ch);

		if (err || ++spins == QB_TX_WAIT) {
			note_channel_error(b, err);
			b->n.send_failed++;
			st = QL_CUDAQ_ERR_INTERNAL;
			break;
		}
		qb_relax();
	}
	if (buf)
		send_replies(b, &buf, 1);
	else if (st == QL_CUDAQ_OK)
		st = QL_CUDAQ_ERR_INVALID_ARG; /* the reply does not fit: counted */
	return st;
}

/* ---- the interface ---------------------------------------------------------- */

/* The ring shape's pump stops: its thread joined, or its caller's turns
 * refused from now on. */
static void pump_stop(struct qb *b)
{
	__atomic_store_n(&b->running, 0, __ATOMIC_RELEASE);
	if (b->pump_started) {
		pthread_join(b->pump, NULL);
		if (b->pump_mode == QB_PUMP_SPIN)
			ql__progress_threads_add(-1);
		b->pump_started = false;
	}
}

static void qb_free(struct qb *b)
{
	pump_stop(b);
	ql__rdv_cleanup(&b->rdv);
	if (b->ch)
		ql_channel_destroy(b->ch);
	if (b->dev)
		ql_device_close(b->dev);
	free(b->table);
	free(b->tx_data);
	free(b->rx_flags);
	free(b->tx_flags);
	free(b->held);
	free(b->open);
	b->magic = 0;
	free(b);
}

static void *zalloc_aligned(size_t len)
{
	size_t n = (len + 63) & ~(size_t)63;
	void *p = aligned_alloc(64, n ? n : 64);

	if (p)
		memset(p, 0, n ? n : 64);
	return p;
}

static ql_cudaq_status_t qb_create(ql_cudaq_bridge_handle_t *out, int argc, char **argv)
{
	struct ql_hsb_channel_config cc = { 0 };
	ql_cudaq_status_t st;
	struct qb *b;
	size_t len;
	int ret;

	if (!out)
		return qb_fail(QL_CUDAQ_ERR_INVALID_ARG, "create: NULL handle pointer");
	*out = NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return qb_fail(QL_CUDAQ_ERR_INTERNAL, "create: out of memory");
	b->magic = QB_MAGIC;
	st = parse_args(b, argc, argv);
	if (st != QL_CUDAQ_OK) {
		qb_free(b);
		return st;
	}
	b->tx_data = zalloc_aligned((size_t)b->num_slots * b->stride);
	b->rx_flags = zalloc_aligned((size_t)b->num_slots * sizeof(uint64_t));
	b->tx_flags = zalloc_aligned((size_t)b->num_slots * sizeof(uint64_t));
	b->held = calloc(b->num_slots, sizeof(*b->held));
	b->open = calloc(b->num_slots, sizeof(*b->open));
	if (!b->tx_data || !b->rx_flags || !b->tx_flags || !b->held || !b->open) {
		qb_free(b);
		return qb_fail(QL_CUDAQ_ERR_INTERNAL, "create: out of memory");
	}
	cc.num_pages = b->num_slots;
	cc.page_size = b->stride;
	cc.resp_size = b->resp_size;
	ret = ql__rdv_init(&b->rdv, b->params_file);
	if (!ret)
		ret = ql__rdv_check_dir(b->params_file);
	if (ret) {
		fprintf(stderr, QB_PREFIX "--params-file=%s: %s\n", b->params_file,
			ql_error_detail());
		qb_free(b);
		return QL_CUDAQ_ERR_INVALID_ARG;
	}
	ret = ql_device_open(b->uri, &b->dev);
	if (ret) {
		fprintf(stderr, QB_PREFIX "--device=%s: %s\n", b->uri, ql_error_detail());
		qb_free(b);
		return ret == -EINVAL ? QL_CUDAQ_ERR_INVALID_ARG : QL_CUDAQ_ERR_INTERNAL;
	}
	ret = ql_hsb_channel_create(b->dev, &cc, &b->ch);
	if (!ret)
		ret = ql__hsb_channel_pages(b->ch, &b->rx_data, &len);
	if (!ret)
		ret = ql_hsb_channel_local_params(b->ch, &b->hp);
	if (ret) {
		fprintf(stderr, QB_PREFIX "the hsb channel on %s: %s\n", b->uri, ql_error_detail());
		qb_free(b);
		return QL_CUDAQ_ERR_INTERNAL;
	}
	/* the QCS may start now: it waits for FILE.ready before it sends */
	ret = ql__rdv_offer_hsb(&b->rdv, &b->hp);
	if (ret) {
		fprintf(stderr, QB_PREFIX "--params-file=%s: %s\n", b->params_file,
			ql_error_detail());
		qb_free(b);
		return QL_CUDAQ_ERR_INTERNAL;
	}
	b->state = QB_CREATED;
	*out = b;
	return QL_CUDAQ_OK;
}

static ql_cudaq_status_t qb_destroy(ql_cudaq_bridge_handle_t h)
{
	struct qb *b = qb_of(h);

	if (!b)
		return QL_CUDAQ_ERR_INVALID_ARG;
	qb_free(b);
	return QL_CUDAQ_OK;
}

static void fill_ring(const struct qb *b, ql_cudaq_ringbuffer_t *r)
{
	r->rx_flags = r->rx_flags_host = b->rx_flags;
	r->tx_flags = r->tx_flags_host = b->tx_flags;
	r->rx_data = r->rx_data_host = b->rx_data;
	r->tx_data = r->tx_data_host = b->tx_data;
	r->rx_stride_sz = r->tx_stride_sz = b->stride;
}

static ql_cudaq_status_t qb_get_transport_context(ql_cudaq_bridge_handle_t h,
						  ql_cudaq_context_kind_t kind, void *out)
{
	struct qb *b = qb_of(h);

	if (!b || !out)
		return QL_CUDAQ_ERR_INVALID_ARG;
	switch (kind) {
	case QL_CUDAQ_CTX_RING_BUFFER:
		if (b->unified)
			return QL_CUDAQ_ERR_UNSUPPORTED;
		fill_ring(b, out);
		return QL_CUDAQ_OK;
	case QL_CUDAQ_CTX_UNIFIED:
		if (!b->unified)
			return QL_CUDAQ_ERR_UNSUPPORTED;
		/* no launch function: the dispatcher's own loop drives us
		 * through get_cpu_dataplane's hooks */
		memset(out, 0, sizeof(ql_cudaq_unified_ctx_t));
		return QL_CUDAQ_OK;
	}
	return QL_CUDAQ_ERR_INVALID_ARG;
}

static int rdv_idle(void *ctx)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	(void)ctx;
	nanosleep(&ts, NULL);
	return 0;
}

static ql_cudaq_status_t qb_connect(ql_cudaq_bridge_handle_t h)
{
	struct qb *b = qb_of(h);
	struct ql_conn_params qcs;
	int ret;

	if (!b)
		return QL_CUDAQ_ERR_INVALID_ARG;
	if (b->state == QB_CONNECTED)
		return QL_CUDAQ_OK;
	if (b->state == QB_DISCONNECTED)
		return qb_fail(QL_CUDAQ_ERR_INVALID_ARG,
			       "connect after disconnect: create a new bridge");
	ret = ql__rdv_wait_client(&b->rdv, b->timeout, rdv_idle, NULL, &qcs);
	if (!ret)
		ret = ql_hsb_channel_connect(b->ch, &qcs, NULL);
	if (!ret)
		ret = ql__rdv_ready(&b->rdv);
	if (ret) {
		fprintf(stderr, QB_PREFIX "connect (rendezvous %s): %s\n", b->params_file,
			ql_error_detail());
		return QL_CUDAQ_ERR_INTERNAL;
	}
	b->state = QB_CONNECTED;
	/* from here the data path (pump or dispatcher thread) owns the channel */
	__atomic_store_n(&b->connected, 1, __ATOMIC_RELEASE);
	return QL_CUDAQ_OK;
}

static ql_cudaq_status_t qb_launch(ql_cudaq_bridge_handle_t h)
{
	struct qb *b = qb_of(h);

	if (!b)
		return QL_CUDAQ_ERR_INVALID_ARG;
	if (b->state != QB_CONNECTED)
		return qb_fail(QL_CUDAQ_ERR_INVALID_ARG, "launch before connect");
	if (b->unified || b->pump_started)
		return QL_CUDAQ_OK; /* unified: the dispatcher's loop is the pump */
	__atomic_store_n(&b->running, 1, __ATOMIC_RELEASE);
	if (b->pump_mode == QB_PUMP_CALLER)
		return QL_CUDAQ_OK; /* qlink_cudaq_bridge_progress is the pump */
	if (pthread_create(&b->pump, NULL, pump_main, b)) {
		__atomic_store_n(&b->running, 0, __ATOMIC_RELEASE);
		return qb_fail(QL_CUDAQ_ERR_INTERNAL, "launch: cannot start the pump thread");
	}
	if (b->pump_mode == QB_PUMP_SPIN)
		ql__progress_threads_add(1); /* a spinning thread (docs/progress.md §2) */
	b->pump_started = true;
	return QL_CUDAQ_OK;
}

static ql_cudaq_status_t qb_disconnect(ql_cudaq_bridge_handle_t h)
{
	struct qb *b = qb_of(h);
	const struct qb_counts *n;

	if (!b)
		return QL_CUDAQ_ERR_INVALID_ARG;
	if (b->state == QB_DISCONNECTED)
		return QL_CUDAQ_OK;
	__atomic_store_n(&b->connected, 0, __ATOMIC_RELEASE);
	pump_stop(b);
	ql__rdv_cleanup(&b->rdv);
	n = &b->n;
	if (n->bad_frames || n->reply_too_big || n->send_failed || n->tx_graph_err || n->tx_bogus ||
	    b->chan_err)
		fprintf(stderr,
			QB_PREFIX "frames=%" PRIu64 " replies=%" PRIu64 " bad_frames=%" PRIu64
				  " reply_too_big=%" PRIu64 " send_failed=%" PRIu64
				  " tx_graph_errors=%" PRIu64 " tx_bogus=%" PRIu64
				  " refused=%" PRIu64 " channel_error=%d\n",
			n->frames, n->replies, n->bad_frames, n->reply_too_big, n->send_failed,
			n->tx_graph_err, n->tx_bogus, n->refused, b->chan_err);
	b->state = QB_DISCONNECTED;
	return QL_CUDAQ_OK;
}

static ql_cudaq_status_t qb_get_cpu_dataplane(ql_cudaq_bridge_handle_t h,
					      ql_cudaq_cpu_dataplane_t *out)
{
	struct qb *b = qb_of(h);

	if (!b || !out)
		return QL_CUDAQ_ERR_INVALID_ARG;
	if (!b->unified)
		return QL_CUDAQ_ERR_UNSUPPORTED;
	memset(out, 0, sizeof(*out));
	out->ctx = b;
	fill_ring(b, &out->ring);
	out->rx_poll = qb_rx_poll;
	out->tx_publish = qb_tx_publish;
	return QL_CUDAQ_OK;
}

/* One line of key=value: how a QCS reaches us. Its own keys for the
 * geometry (pages, page_size), so as not to repeat the slots= and
 * slot_size= that CUDA-Q's server appends to its READY line. */
static ql_cudaq_status_t qb_get_endpoint_info(ql_cudaq_bridge_handle_t h, char *buf, size_t len)
{
	struct qb *b = qb_of(h);
	char gid[INET6_ADDRSTRLEN];
	int n;

	if (!b || !buf || !len)
		return QL_CUDAQ_ERR_INVALID_ARG;
	if (!inet_ntop(AF_INET6, b->hp.gid.raw, gid, sizeof(gid)))
		return QL_CUDAQ_ERR_INTERNAL;
	n = snprintf(
		buf, len,
		"transport=qlink-hsb device=%s params_file=%s shape=%s pump=%s qpn=0x%06" PRIx32
		" gid=%s rkey=0x%08" PRIx32 " page_addr=0x%" PRIx64 " page_size=%" PRIu32
		" pages=%" PRIu32 " frame_len=%" PRIu32 " resp_size=%" PRIu32,
		b->uri, b->params_file, b->unified ? "unified" : "ring", pump_names[b->pump_mode],
		b->hp.qpn, gid, b->hp.rkey, b->hp.page_addr, b->hp.page_size, b->hp.num_pages,
		b->hp.frame_len, b->hp.resp_size);
	if (n < 0 || (size_t)n >= len) {
		buf[0] = '\0';
		return QL_CUDAQ_ERR_INVALID_ARG;
	}
	return QL_CUDAQ_OK;
}

static ql_cudaq_status_t qb_get_ring_geometry(ql_cudaq_bridge_handle_t h, uint32_t *num_slots,
					      uint32_t *slot_size)
{
	struct qb *b = qb_of(h);

	if (!b || !num_slots || !slot_size)
		return QL_CUDAQ_ERR_INVALID_ARG;
	*num_slots = b->num_slots;
	*slot_size = b->stride;
	return QL_CUDAQ_OK;
}

/*
 * The table holds `count` entries of the caller's layout, and nothing in it
 * says which: CUDA-Q headers before routing_key have 168-byte entries,
 * later ones 176. Reading 176-byte entries from a 168-byte caller reads
 * past its array (8 bytes for one entry, and every later entry shifted).
 * So the entries are read at the stride the caller declared at create
 * (--function-entry-size, default 176), never beyond count x that stride,
 * and copied field by field into this provider's layout (routing_key 0 for
 * the older one). A table that is not of that layout is refused by name
 * where it shows (an entry read at the wrong stride usually has an
 * unknown dispatch mode or more arguments than a schema holds).
 */
static ql_cudaq_status_t qb_set_function_table(ql_cudaq_bridge_handle_t h,
					       const ql_cudaq_function_table_t *t)
{
	struct qb *b = qb_of(h);
	ql_cudaq_function_entry_t *copy;
	const uint8_t *base;

	if (!b || !t)
		return QL_CUDAQ_ERR_INVALID_ARG;
	if (!t->entries || !t->count)
		return qb_fail(QL_CUDAQ_ERR_INVALID_ARG, "set_function_table: empty table");
	if (t->count > QB_MAX_FUNCTIONS)
		return qb_fail(QL_CUDAQ_ERR_INVALID_ARG,
			       "set_function_table: more than 65536 entries");
	copy = calloc(t->count, sizeof(*copy));
	if (!copy)
		return qb_fail(QL_CUDAQ_ERR_INTERNAL, "set_function_table: out of memory");
	base = (const uint8_t *)t->entries;
	for (uint32_t i = 0; i < t->count; i++) {
		const uint8_t *src = base + (size_t)i * b->entry_size;
		ql_cudaq_function_entry_t *e = &copy[i];

		/* the fields that tell a misread entry first, before the whole of
		 * it is read (one read at the wrong stride ends past the array) */
		uint8_t mode = src[offsetof(ql_cudaq_function_entry_t, dispatch_mode)];
		uint8_t nargs = src[offsetof(ql_cudaq_function_entry_t, schema.num_args)];
		uint8_t nres = src[offsetof(ql_cudaq_function_entry_t, schema.num_results)];

		if (mode > QL_CUDAQ_DISPATCH_HOST_CALL || nargs > 8 || nres > 4) {
			char why[300];

			snprintf(why, sizeof(why),
				 "set_function_table: entry %u is not a %u-byte "
				 "cudaq_function_entry_t (an unknown dispatch mode or more than 8 "
				 "arguments / 4 results); a caller built against a CUDA-Q header "
				 "with %u-byte entries must say so at create "
				 "(--function-entry-size=%u)",
				 i, b->entry_size,
				 b->entry_size == QL_CUDAQ_ENTRY_SIZE ? QL_CUDAQ_ENTRY_SIZE_V3_0 :
									QL_CUDAQ_ENTRY_SIZE,
				 b->entry_size == QL_CUDAQ_ENTRY_SIZE ? QL_CUDAQ_ENTRY_SIZE_V3_0 :
									QL_CUDAQ_ENTRY_SIZE);
			free(copy);
			return qb_fail(QL_CUDAQ_ERR_INVALID_ARG, why);
		}
		/* everything up to routing_key is common to both layouts */
		memcpy(e, src, offsetof(ql_cudaq_function_entry_t, routing_key));
		if (b->entry_size >= sizeof(*e))
			memcpy(&e->routing_key,
			       src + offsetof(ql_cudaq_function_entry_t, routing_key),
			       sizeof(e->routing_key));
		for (uint32_t j = 0; j < i; j++)
			if (copy[j].function_id == e->function_id) {
				free(copy);
				return qb_fail(QL_CUDAQ_ERR_INVALID_ARG,
					       "set_function_table: a function_id twice");
			}
	}
	free(b->table);
	b->table = copy;
	b->table_count = t->count;
	return QL_CUDAQ_OK;
}

/* The one exported symbol (bridge.map). */
__attribute__((visibility("default"))) ql_cudaq_bridge_interface_t *
cudaq_realtime_get_bridge_interface(void);

ql_cudaq_bridge_interface_t *cudaq_realtime_get_bridge_interface(void)
{
	static ql_cudaq_bridge_interface_t iface = {
		.version = QL_CUDAQ_BRIDGE_VERSION,
		.create = qb_create,
		.destroy = qb_destroy,
		.get_transport_context = qb_get_transport_context,
		.connect = qb_connect,
		.launch = qb_launch,
		.disconnect = qb_disconnect,
		.get_cpu_dataplane = qb_get_cpu_dataplane,
		.get_endpoint_info = qb_get_endpoint_info,
		.get_ring_geometry = qb_get_ring_geometry,
		.set_function_table = qb_set_function_table,
	};

	return &iface;
}
