/* SPDX-License-Identifier: MIT */
/*
 * udp_rxe_interop: one end of a verbs conversation between two processes,
 * each on its own device URI, to prove that two RDMA implementations
 * interoperate: Linux Soft-RoCE (ibv://rxeN) and qlink's soft+udp NIC, in
 * either role. tests/rxe/guest-init.sh runs it in the qemu guest, one
 * process in the root network namespace on the kernel's rxe device and one
 * in a second namespace on soft+udp://IP (docs/soft-udp.md, section 16); the
 * same program runs rxe <-> rxe, and soft+shm <-> soft+shm on the build
 * host (ctest udp_rxe_interop_shm), so that the harness itself is proven.
 *
 *   udp_rxe_interop --side a|b --uri URI --rdv DIR [--cases PATTERN]
 *                   [--count N] [--lossy-side a|b] [--timeout SEC] [--corrupt]
 *                   [--skip SUBSTRING]
 *   udp_rxe_interop --capture IFACE --capture-dir DIR [--capture-src IPV4]
 *                   [--capture-seconds SEC]
 *   udp_rxe_interop --verify-vectors DIR
 *
 * Both sides walk the same case list: for each requester side (a, b), RC
 * WRITE, READ, SEND/RECV, WRITE WITH IMMEDIATE, CMP_SWP and FETCH_ADD, and
 * UC SEND, WRITE and WRITE WITH IMMEDIATE, COUNT messages each of sizes
 * cycling through 8, 1000, 4113 and 16387 bytes (up to 17 packets at MTU
 * 1024). A case is: fresh QPs, parameters exchanged through files in DIR
 * (src/transport/rendezvous.h), the responder arms its memory and receives, the
 * requester posts everything and checks every completion (status, opcode,
 * wr_id order, length, immediate, READ data, atomic original values), then
 * the responder checks every byte of its region (the messages where they
 * belong, nothing written anywhere else, atomics' final values, every
 * receive completion). Each side writes its verdict; a case passes only if
 * both do. --lossy-side names the side whose transmissions the test drops
 * (soft+udp ?drop=..., or netem): UC messages that side sends may then be
 * lost, as the spec says UC does, and the checks accept a lost message
 * (never a torn SEND, a wrong byte or a duplicate); RC stays exact.
 * --cases runs only the cases whose name contains PATTERN, --skip leaves
 * out those whose name contains SUBSTRING (each said on a "skipped" line).
 * --corrupt (to test the test): the responder spoils one byte of its
 * region after arming it, which the checks must catch.
 *
 * Kernel counters: a side on ibv://DEV reads every rxe device's
 * hw_counters and this namespace's /proc/net/snmp before and after each
 * case (docs/soft-udp.md, 16.3, says which counters are errors). Linux's
 * rxe drops a packet with a bad ICRC or header silently, without a
 * counter, but only after UDP has delivered it; so the packets UDP handed
 * to rxe (Udp InDatagrams) minus those rxe accepted (rcvd_pkts) is the
 * count of rejected packets, and must be 0.
 *
 * --capture: keep the first RoCEv2 packet of each BTH opcode seen on
 * IFACE (AF_PACKET, both directions; from IPV4 only when given) as a test
 * vector file in DIR (tests/data/rxe-packets/): the IP and UDP facts, the
 * ICRC computed here, and the packet in hex.
 *
 * --verify-vectors: recompute the ICRC of every such file in DIR, and
 * have soft+udp's codec (src/providers/sudp/roce.c) parse each and solve for its IPv4
 * Identification, which must be the one the kernel sent.
 *
 * Exit status: 0 every case passed, 1 a case failed, 2 usage or setup.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <qlink/error.h>
#include <qlink/verbs.h>

#include "roce.h" /* src/providers/sudp: the soft+udp codec, checked against the kernel's packets */
#include "transport/rendezvous.h"

#define IX_BUF_LEN (2u << 20) /* the MR: [0, half) the peer's, [half, end) local */
#define IX_HALF (IX_BUF_LEN / 2)
#define IX_MAX_COUNT 48
#define IX_ATOMIC_ADD 0x0000000100000003ull /* crosses the 32-bit halves */
#define IX_ROCE_PORT 4791
#define IX_RECV_STRIDE 16512 /* a receive buffer: the largest message + 64, aligned */

enum ix_op { OP_WRITE, OP_READ, OP_SEND, OP_WRITE_IMM, OP_CMP_SWP, OP_FETCH_ADD };
static const char *const op_names[] = {
	"write", "read", "send", "write_imm", "cmp_swp", "fetch_add"
};
static const unsigned msg_sizes[] = { 8, 1000, 4113, 16387 };

struct ix_case {
	int n;
	enum ibv_qp_type type;
	enum ix_op op;
	char req; /* 'a' or 'b' */
	char name[48];
};

static struct {
	char side, other;
	const char *uri, *rdv, *pattern, *skip;
	char lossy;   /* 0: none */
	bool corrupt; /* test the test: the responder spoils one byte */
	int count;
	double timeout_s;
	char ibv_dev[64]; /* set when uri is ibv://DEV */
} cfg = { .count = 24, .timeout_s = 30 };

static struct ql_device *dev;
static struct ql_pd *pd;
static uint8_t *buf;
static struct ql_mr *mr;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- verdicts --------------------------------------------------------- */

static char why[512];  /* the first failure of the running case */
static bool peer_gone; /* a rendezvous timed out: the other side is not there */

static void __attribute__((format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	if (why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
}

/* ---- the data ------------------------------------------------------------ */

static unsigned msg_size(int i)
{
	return msg_sizes[i % (int)(sizeof(msg_sizes) / sizeof(msg_sizes[0]))];
}

/* Offset of message i in a region; 64 bytes of untouched gap after each. */
static size_t msg_off(int i)
{
	size_t off = 0;

	for (int k = 0; k < i; k++)
		off += (msg_size(k) + 64 + 63) & ~(size_t)63;
	return off;
}

static uint8_t pat(int cn, int i, size_t j)
{
	return (uint8_t)(cn * 29 + i * 131 + j * 7 + (j >> 8) * 13 + 1);
}

static void fill(uint8_t *p, int cn, int i, size_t len)
{
	for (size_t j = 0; j < len; j++)
		p[j] = pat(cn, i, j);
}

/* Index of the first byte that differs from message i's pattern, or len. */
static size_t first_diff(const uint8_t *p, int cn, int i, size_t len)
{
	for (size_t j = 0; j < len; j++)
		if (p[j] != pat(cn, i, j))
			return j;
	return len;
}

static uint64_t atomic_init(int cn)
{
	return 0x1122334455667788ull + (uint64_t)cn * 0x10001ull;
}

static uint32_t imm_of(int cn, int i)
{
	return 0xa5000000u | ((uint32_t)cn << 12) | (uint32_t)i;
}

/* ---- rendezvous: parameters and barriers through files --------------- */

/* This side's device. soft+udp in caller progress mode (docs/progress.md)
 * moves only when this process runs it: every wait here keeps it going (a
 * responder may have nothing to poll while the requester's WRITEs land). */
static struct ql_device *ix_dev;

static void ix_sleep_us(unsigned int us)
{
	for (unsigned int t = 0; t < us; t += 100) {
		if (ix_dev)
			(void)ql_device_progress(ix_dev);
		usleep(100);
	}
}

static int idle_fn(void *ctx)
{
	(void)ctx;
	ix_sleep_us(2000);
	return 0;
}

/* Write DIR/case-N.STAGE.SIDE holding text, wait for the other side's and
 * return its text. */
static int barrier(int cn, const char *stage, const char *text, char *other, size_t len)
{
	char mine[4200], theirs[4200], line[600];
	int ret;

	snprintf(mine, sizeof(mine), "%s/case-%d.%s.%c", cfg.rdv, cn, stage, cfg.side);
	snprintf(theirs, sizeof(theirs), "%s/case-%d.%s.%c", cfg.rdv, cn, stage, cfg.other);
	snprintf(line, sizeof(line), "%s\n", text);
	ret = ql__rdv_create(mine, line);
	if (ret) {
		fail("barrier %s: %s", stage, ql_error_detail());
		return ret;
	}
	ret = ql__rdv_wait(theirs, cfg.timeout_s, idle_fn, NULL, line, sizeof(line));
	if (ret) {
		fail("barrier %s: the other side did not come (%s)", stage, ql_error_detail());
		peer_gone = true;
		return ret;
	}
	if (other)
		snprintf(other, len, "%s", line);
	return 0;
}

/* ---- kernel counters ----------------------------------------------------- */

#define IX_MAX_CTR 256
struct ctr {
	char name[160]; /* "DEV/PORT/counter" or "snmp/Udp/Field" */
	uint64_t v;
};
struct ctrs {
	int n;
	struct ctr c[IX_MAX_CTR];
};

static void ctr_add(struct ctrs *s, const char *name, uint64_t v)
{
	if (s->n < IX_MAX_CTR) {
		snprintf(s->c[s->n].name, sizeof(s->c[0].name), "%s", name);
		s->c[s->n++].v = v;
	}
}

static void read_hw_counters(struct ctrs *s)
{
	char path[512], name[160];
	FILE *ls;

	/* every rxe device: the peer of this one may be another rxe device */
	ls = popen("ls -d /sys/class/infiniband/*/ports/*/hw_counters/* 2>/dev/null", "r");
	if (!ls)
		return;
	while (fgets(path, sizeof(path), ls)) {
		unsigned long long v;
		char dname[64], ctr[64];
		unsigned port;
		FILE *f;

		path[strcspn(path, "\n")] = '\0';
		if (sscanf(path, "/sys/class/infiniband/%63[^/]/ports/%u/hw_counters/%63s", dname,
			   &port, ctr) != 3 ||
		    !strcmp(ctr, "lifespan"))
			continue;
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &v) == 1) {
			snprintf(name, sizeof(name), "%s/%u/%s", dname, port, ctr);
			ctr_add(s, name, v);
		}
		fclose(f);
	}
	pclose(ls);
}

/* The Udp line pair of /proc/net/snmp (this process's namespace). */
static void read_snmp_udp(struct ctrs *s)
{
	char h[1024], v[1024], name[160];
	FILE *f = fopen("/proc/net/snmp", "r");

	if (!f)
		return;
	while (fgets(h, sizeof(h), f)) {
		char *hs, *vs, *ht, *vt;

		if (strncmp(h, "Udp: ", 5) || !fgets(v, sizeof(v), f) || strncmp(v, "Udp: ", 5))
			continue;
		ht = strtok_r(h + 5, " \n", &hs);
		vt = strtok_r(v + 5, " \n", &vs);
		while (ht && vt) {
			snprintf(name, sizeof(name), "snmp/Udp/%s", ht);
			ctr_add(s, name, strtoull(vt, NULL, 10));
			ht = strtok_r(NULL, " \n", &hs);
			vt = strtok_r(NULL, " \n", &vs);
		}
		break;
	}
	fclose(f);
}

static void read_ctrs(struct ctrs *s)
{
	s->n = 0;
	read_hw_counters(s);
	read_snmp_udp(s);
}

static uint64_t ctr_delta(const struct ctrs *a, const struct ctrs *b, int k)
{
	for (int i = 0; i < a->n; i++)
		if (!strcmp(a->c[i].name, b->c[k].name))
			return b->c[k].v - a->c[i].v;
	return b->c[k].v;
}

/* How a counter is judged (docs/soft-udp.md, 16.3 "Kernel counters"). */
enum ctr_class { CTR_INFO, CTR_RECOVERY, CTR_ERROR };

static enum ctr_class classify(const char *name)
{
	const char *c = strrchr(name, '/') + 1;
	static const char *const info[] = { "sent_pkts",    "rcvd_pkts",  "ack_deferred",
					    "rdma_sends",   "rdma_recvs", "InDatagrams",
					    "OutDatagrams", "NoPorts",	  "IgnoredMulti",
					    "MemErrors" };
	static const char *const recovery[] = { "duplicate_request", "out_of_seq_request",
						"rcvd_seq_err", "completer_retry_err" };

	for (size_t i = 0; i < sizeof(info) / sizeof(info[0]); i++)
		if (!strcmp(c, info[i]))
			return !strcmp(c, "MemErrors") ? CTR_ERROR : CTR_INFO;
	for (size_t i = 0; i < sizeof(recovery) / sizeof(recovery[0]); i++)
		if (!strcmp(c, recovery[i]))
			return CTR_RECOVERY;
	/* the rest of rxe's: retry_exceeded_err, retry_rnr_exceeded_err,
	 * rcvd_rnr_err, send_rnr_err, send_err, link_downed; UDP's InErrors,
	 * RcvbufErrors, SndbufErrors, InCsumErrors; anything unknown */
	return CTR_ERROR;
}

static uint64_t sum_named(const struct ctrs *a, const struct ctrs *b, const char *suffix)
{
	uint64_t s = 0;
	size_t sl = strlen(suffix);

	for (int k = 0; k < b->n; k++) {
		size_t l = strlen(b->c[k].name);

		if (l >= sl && !strcmp(b->c[k].name + l - sl, suffix))
			s += ctr_delta(a, b, k);
	}
	return s;
}

static uint64_t total_kernel_recovery[2]; /* [0]: as responder, [1]: as requester */

/* Judge one case's counters; appends the moved ones to out. Recovery
 * counters are named, not judged: without injected loss they may still
 * move when an RC timer fires before a slow ACK on this emulated machine (a
 * spurious retransmission, harmless); a packet the kernel refused shows in
 * the UDP balance instead, whatever the timing. */
static void judge_ctrs(const struct ctrs *a, const struct ctrs *b, char *out, size_t len)
{
	size_t o = 0;
	uint64_t indg, rcvd;

	out[0] = '\0';
	for (int k = 0; k < b->n; k++) {
		uint64_t d = ctr_delta(a, b, k);
		enum ctr_class cl;

		if (!d)
			continue;
		cl = classify(b->c[k].name);
		if (cl != CTR_INFO && o < len)
			o += (size_t)snprintf(out + o, len - o, " %s+%" PRIu64, b->c[k].name, d);
		if (cl == CTR_ERROR)
			fail("kernel error counter %s moved by %" PRIu64, b->c[k].name, d);
	}
	total_kernel_recovery[0] +=
		sum_named(a, b, "/duplicate_request") + sum_named(a, b, "/out_of_seq_request");
	total_kernel_recovery[1] +=
		sum_named(a, b, "/completer_retry_err") + sum_named(a, b, "/rcvd_seq_err");
	/* packets UDP delivered to rxe that rxe did not accept (ICRC, header) */
	indg = sum_named(a, b, "snmp/Udp/InDatagrams");
	rcvd = sum_named(a, b, "/rcvd_pkts");
	if (o < len)
		o += (size_t)snprintf(out + o, len - o, " udp_in=%" PRIu64 " rxe_rcvd=%" PRIu64,
				      indg, rcvd);
	if (indg != rcvd)
		fail("rxe accepted %" PRIu64 " of the %" PRIu64
		     " UDP datagrams delivered in this namespace: %" PRId64
		     " refused (bad ICRC or header) or not for rxe",
		     rcvd, indg, (int64_t)(indg - rcvd));
}

/* ---- one case ------------------------------------------------------------- */

static int poll_n(struct ql_cq *cq, struct ibv_wc *wc, int n, double deadline)
{
	int got = 0;

	while (got < n) {
		int r = ql_cq_poll(cq, n - got, wc + got);

		if (r < 0)
			return r;
		got += r;
		if (!r && now_s() > deadline)
			break;
	}
	return got;
}

static enum ibv_wc_opcode req_wc_opcode(enum ix_op op)
{
	switch (op) {
	case OP_WRITE:
	case OP_WRITE_IMM:
		return IBV_WC_RDMA_WRITE;
	case OP_READ:
		return IBV_WC_RDMA_READ;
	case OP_SEND:
		return IBV_WC_SEND;
	case OP_CMP_SWP:
		return IBV_WC_COMP_SWAP;
	default:
		return IBV_WC_FETCH_ADD;
	}
}

/* The requester: post every message, check every completion. */
static void run_requester(const struct ix_case *c, struct ql_qp *qp, struct ql_cq *scq,
			  const struct ql_conn_params *peer)
{
	static struct ibv_send_wr wrs[IX_MAX_COUNT];
	static struct ibv_sge sges[IX_MAX_COUNT];
	static struct ibv_wc wc[IX_MAX_COUNT];
	struct ibv_send_wr *bad;
	uint8_t *local = buf + IX_HALF;
	uint64_t v0 = atomic_init(c->n);
	int n = cfg.count, got, ret;
	bool atomic = c->op == OP_CMP_SWP || c->op == OP_FETCH_ADD;

	memset(local, 0, IX_HALF);
	memset(wrs, 0, sizeof(wrs));
	for (int i = 0; i < n; i++) {
		size_t off = atomic ? (size_t)i * 8 : msg_off(i);
		unsigned sz = atomic ? 8 : msg_size(i);

		if (c->op == OP_WRITE || c->op == OP_WRITE_IMM || c->op == OP_SEND)
			fill(local + off, c->n, i, sz);
		sges[i] = (struct ibv_sge){ .addr = (uintptr_t)(local + off),
					    .length = sz,
					    .lkey = ql_mr_lkey(mr) };
		wrs[i].wr_id = (uint64_t)i;
		wrs[i].sg_list = &sges[i];
		wrs[i].num_sge = 1;
		wrs[i].send_flags = IBV_SEND_SIGNALED;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		switch (c->op) {
		case OP_WRITE:
			wrs[i].opcode = IBV_WR_RDMA_WRITE;
			break;
		case OP_WRITE_IMM:
			wrs[i].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			wrs[i].imm_data = htonl(imm_of(c->n, i));
			break;
		case OP_READ:
			wrs[i].opcode = IBV_WR_RDMA_READ;
			break;
		case OP_SEND:
			wrs[i].opcode = IBV_WR_SEND;
			break;
		case OP_CMP_SWP:
			wrs[i].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			wrs[i].wr.atomic.compare_add = v0 + (uint64_t)i;
			wrs[i].wr.atomic.swap = v0 + (uint64_t)i + 1;
			break;
		case OP_FETCH_ADD:
			wrs[i].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wrs[i].wr.atomic.compare_add = IX_ATOMIC_ADD;
			break;
		}
		if (atomic) {
			wrs[i].wr.atomic.remote_addr = peer->vaddr;
			wrs[i].wr.atomic.rkey = peer->rkey;
		} else if (c->op != OP_SEND) {
			wrs[i].wr.rdma.remote_addr = peer->vaddr + msg_off(i);
			wrs[i].wr.rdma.rkey = peer->rkey;
		}
	}
	ret = ql_qp_post_send(qp, wrs, &bad);
	if (ret) {
		fail("post_send: %d at wr %d (%s)", ret, bad ? (int)bad->wr_id : -1,
		     ql_error_detail());
		return;
	}
	got = poll_n(scq, wc, n, now_s() + cfg.timeout_s);
	if (got < 0) {
		fail("poll send CQ: %d", got);
		return;
	}
	for (int i = 0; i < got; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			fail("completion %d: status %s (%d), vendor_err %u", i,
			     ibv_wc_status_str(wc[i].status), wc[i].status, wc[i].vendor_err);
			return;
		}
		if (wc[i].wr_id != (uint64_t)i || wc[i].opcode != req_wc_opcode(c->op)) {
			fail("completion %d: wr_id %" PRIu64 " opcode %d, want wr_id %d opcode %d",
			     i, wc[i].wr_id, wc[i].opcode, i, req_wc_opcode(c->op));
			return;
		}
	}
	if (got < n) {
		fail("%d of %d send completions within %.0f s", got, n, cfg.timeout_s);
		return;
	}
	for (int i = 0; i < n; i++) {
		if (c->op == OP_READ) {
			size_t d = first_diff(local + msg_off(i), c->n, i, msg_size(i));

			if (d != msg_size(i)) {
				fail("READ %d (%u bytes): byte %zu is 0x%02x, want 0x%02x", i,
				     msg_size(i), d, local[msg_off(i) + d], pat(c->n, i, d));
				return;
			}
		} else if (atomic) {
			uint64_t got_v, want;

			memcpy(&got_v, local + (size_t)i * 8, 8);
			want = c->op == OP_CMP_SWP ? v0 + (uint64_t)i :
						     v0 + (uint64_t)i * IX_ATOMIC_ADD;
			if (got_v != want) {
				fail("%s %d returned 0x%016" PRIx64 ", want 0x%016" PRIx64,
				     op_names[c->op], i, got_v, want);
				return;
			}
		}
	}
}

/* The responder's memory before the requester runs. */
static void arm_responder(const struct ix_case *c, struct ql_qp *qp)
{
	static struct ibv_recv_wr wrs[IX_MAX_COUNT];
	static struct ibv_sge sges[IX_MAX_COUNT];
	struct ibv_recv_wr *bad;
	int n = cfg.count, ret;

	memset(buf, 0, IX_HALF);
	if (c->op == OP_READ)
		for (int i = 0; i < n; i++)
			fill(buf + msg_off(i), c->n, i, msg_size(i));
	if (c->op == OP_CMP_SWP || c->op == OP_FETCH_ADD) {
		uint64_t v0 = atomic_init(c->n);

		memcpy(buf, &v0, 8);
	}
	if (cfg.corrupt) /* READ: a wrong source byte; else a byte past the messages */
		buf[c->op == OP_READ ? msg_off(1) + 100 : msg_off(n) + 7] ^= 0x5a;
	if (c->op != OP_SEND && c->op != OP_WRITE_IMM)
		return;
	memset(wrs, 0, sizeof(wrs));
	for (int i = 0; i < n; i++) {
		wrs[i].wr_id = (uint64_t)i;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		if (c->op == OP_SEND) {
			/* each receive can hold any message (UC may skip one): a
			 * SEND that is too long shows as a wrong byte_len */
			sges[i] = (struct ibv_sge){ .addr = (uintptr_t)(buf +
									(size_t)i * IX_RECV_STRIDE),
						    .length = IX_RECV_STRIDE,
						    .lkey = ql_mr_lkey(mr) };
			wrs[i].sg_list = &sges[i];
			wrs[i].num_sge = 1;
		}
	}
	ret = ql_qp_post_recv(qp, wrs, &bad);
	if (ret)
		fail("post_recv: %d (%s)", ret, ql_error_detail());
}

/* The responder, once the requester is done: every receive completion and
 * every byte of its region. `may_lose`: a UC message may be missing. Each
 * byte that checks out is cleared; then the whole region must be zero, so
 * that a byte written anywhere else (a gap, past a message) is caught. */
static void check_responder(const struct ix_case *c, struct ql_cq *rcq, bool may_lose)
{
	static struct ibv_wc wc[IX_MAX_COUNT];
	bool recv = c->op == OP_SEND || c->op == OP_WRITE_IMM;
	bool arrived[IX_MAX_COUNT] = { false };
	int n = cfg.count, got = 0, prev = -1;

	if (recv) {
		/* RC: all are there once the requester has its ACKs; UC: wait a
		 * little for the last ones, then take what came */
		double deadline = now_s() + (may_lose ? 0.5 : cfg.timeout_s);

		got = poll_n(rcq, wc, n, deadline);
		if (got < 0) {
			fail("poll receive CQ: %d", got);
			return;
		}
	}
	for (int k = 0; k < got; k++) {
		enum ibv_wc_opcode want = c->op == OP_SEND ? IBV_WC_RECV :
							     IBV_WC_RECV_RDMA_WITH_IMM;
		int i = -1;

		if (wc[k].status != IBV_WC_SUCCESS || wc[k].opcode != want ||
		    wc[k].wr_id != (uint64_t)k) {
			fail("receive completion %d: status %s opcode %d wr_id %" PRIu64
			     " (want opcode %d wr_id %d)",
			     k, ibv_wc_status_str(wc[k].status), wc[k].opcode, wc[k].wr_id, want,
			     k);
			return;
		}
		if (c->op == OP_SEND) {
			/* receive k holds the k-th message that arrived (UC may skip
			 * some): which one, by its length and bytes */
			uint8_t *p = buf + (size_t)k * IX_RECV_STRIDE;

			for (int m = prev + 1; m < n && i < 0; m++)
				if (msg_size(m) == wc[k].byte_len &&
				    first_diff(p, c->n, m, msg_size(m)) == msg_size(m))
					i = m;
			if (i < 0 || (!may_lose && i != k)) {
				size_t d = first_diff(p, c->n, k, msg_size(k));

				fail("receive %d: %u bytes, not message %d (%u bytes; byte %zu is "
				     "0x%02x, want 0x%02x)%s",
				     k, wc[k].byte_len, k, msg_size(k), d, p[d], pat(c->n, k, d),
				     may_lose ? " nor a later one" : "");
				return;
			}
			memset(p, 0, msg_size(i));
		} else {
			uint32_t imm = ntohl(wc[k].imm_data);

			i = (int)(imm & 0xfff);
			if (!(wc[k].wc_flags & IBV_WC_WITH_IMM) ||
			    (imm & 0xfffff000u) != (imm_of(c->n, 0) & 0xfffff000u) || i <= prev ||
			    i >= n || (!may_lose && i != k) || wc[k].byte_len != msg_size(i)) {
				fail("receive %d: immediate 0x%08x (flags 0x%x) byte_len %u, want "
				     "0x%08x and %u bytes",
				     k, imm, wc[k].wc_flags, wc[k].byte_len, imm_of(c->n, k),
				     msg_size(k));
				return;
			}
		}
		arrived[i] = true;
		prev = i;
	}
	if (c->type == IBV_QPT_UC && c->op == OP_WRITE) {
		/* a UC WRITE completes at the requester once it is on the wire
		 * (rxe and soft+udp alike): wait until every message has landed,
		 * or, when some may be lost, until the wire has been quiet a while */
		double deadline = now_s() + (may_lose ? 0.3 : cfg.timeout_s);

		while (now_s() < deadline) {
			int i = 0;

			while (i < n &&
			       first_diff(buf + msg_off(i), c->n, i, msg_size(i)) == msg_size(i))
				i++;
			if (i == n)
				break;
			ix_sleep_us(1000);
		}
	}
	if (recv && got < n && !may_lose) {
		fail("%d of %d receive completions", got, n);
		return;
	}
	if (recv && got == 0) {
		fail("no message arrived at all");
		return;
	}
	if (c->op == OP_SEND && may_lose)
		/* UC: the first packets of a SEND whose later packet was lost
		 * land in the receive buffer that the next message then reuses
		 * (or that stays posted): what is past the messages checked is
		 * that debris, not a stray write */
		memset(buf, 0, (size_t)n * IX_RECV_STRIDE);
	if (c->op == OP_CMP_SWP || c->op == OP_FETCH_ADD) {
		uint64_t v, want = atomic_init(c->n) +
				   (uint64_t)n * (c->op == OP_CMP_SWP ? 1 : IX_ATOMIC_ADD);

		memcpy(&v, buf, 8);
		if (v != want) {
			fail("the target holds 0x%016" PRIx64 " after %d %s, want 0x%016" PRIx64, v,
			     n, op_names[c->op], want);
			return;
		}
		memset(buf, 0, 8);
	} else if (c->op != OP_SEND) {
		/* WRITE, WRITE WITH IMMEDIATE: the data in place; READ: the source
		 * still as it was */
		for (int i = 0; i < n; i++) {
			uint8_t *p = buf + msg_off(i);
			size_t sz = msg_size(i), d = first_diff(p, c->n, i, sz);

			/* UC under loss: the packets before a lost one may have
			 * landed; nothing after it may (zeros remain) */
			if (d < sz && may_lose && !arrived[i])
				sz = d;
			else if (d < sz) {
				fail("%s %d (%zu bytes): byte %zu is 0x%02x, want 0x%02x",
				     op_names[c->op], i, sz, d, p[d], pat(c->n, i, d));
				return;
			}
			memset(p, 0, sz);
		}
	}
	for (size_t j = 0; j < IX_HALF; j++)
		if (buf[j]) {
			fail("byte %zu of the region is 0x%02x: written outside any message", j,
			     buf[j]);
			return;
		}
}

static int run_case(const struct ix_case *c)
{
	struct ql_qp_init_attr ia = { 0 };
	struct ql_cq *scq = NULL, *rcq = NULL;
	struct ql_qp *qp = NULL;
	struct ql_conn_params mine, peer;
	struct ql_qp_connect_opts co;
	struct ql_rdv rdv;
	struct ctrs *before = NULL, *after = NULL;
	char file[4096], other[600], ctrtxt[1024] = "";
	bool requester = c->req == cfg.side;
	/* UC messages from the lossy side may be lost */
	bool may_lose = c->type == IBV_QPT_UC && cfg.lossy == c->req;
	double t0 = now_s();
	int ret;

	why[0] = '\0';
	if (cfg.ibv_dev[0]) {
		before = calloc(1, sizeof(*before));
		after = calloc(1, sizeof(*after));
		if (!before || !after) {
			fail("out of memory");
			goto out;
		}
		read_ctrs(before);
	}
	if (ql_cq_create(dev, 2 * IX_MAX_COUNT, &scq) ||
	    ql_cq_create(dev, 2 * IX_MAX_COUNT, &rcq)) {
		fail("cq_create: %s", ql_error_detail());
		goto out;
	}
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.qp_type = c->type;
	ia.cap.max_send_wr = IX_MAX_COUNT;
	ia.cap.max_recv_wr = IX_MAX_COUNT;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ret = ql_qp_create(pd, &ia, &qp);
	if (ret) {
		fail("qp_create: %s", ql_error_detail());
		goto out;
	}
	ret = ql_qp_local_params(qp, &mine);
	if (ret) {
		fail("local params: %s", ql_error_detail());
		goto out;
	}
	mine.vaddr = (uintptr_t)buf;
	mine.rkey = ql_mr_rkey(mr);
	mine.length = IX_HALF;
	mine.qp_type = c->type;
	snprintf(file, sizeof(file), "%s/case-%d.params", cfg.rdv, c->n);
	ql__rdv_init(&rdv, file);
	if (cfg.side == 'a')
		ret = ql__rdv_offer(&rdv, &mine) ?:
			      ql__rdv_wait_client(&rdv, cfg.timeout_s, idle_fn, NULL, &peer);
	else
		ret = ql__rdv_wait_server(&rdv, cfg.timeout_s, idle_fn, NULL, &peer);
	if (ret) {
		fail("rendezvous: %s", ql_error_detail());
		peer_gone = true;
		goto out;
	}
	ql_qp_connect_opts_default(&co);
	co.timeout = 14; /* 67 ms: an emulated guest under load is slow */
	co.retry_cnt = 7;
	ret = ql_qp_connect(qp, &peer, &co);
	if (ret) {
		fail("connect: %s", ql_error_detail());
		goto out;
	}
	if (cfg.side == 'a')
		ret = ql__rdv_ready(&rdv);
	else
		ret = ql__rdv_join(&rdv, &mine, cfg.timeout_s, idle_fn, NULL);
	if (ret) {
		fail("rendezvous: %s", ql_error_detail());
		peer_gone = true;
		goto out;
	}
	if (!requester)
		arm_responder(c, qp);
	if (barrier(c->n, "armed", why[0] ? "fail" : "ok", other, sizeof(other)))
		goto out;
	if (strcmp(other, "ok")) {
		fail("the other side failed to arm");
		goto out;
	}
	if (requester && !why[0])
		run_requester(c, qp, scq, &peer);
	/* the requester's verdict so far; the responder then checks memory */
	if (barrier(c->n, "done", why[0] ? why : "ok", other, sizeof(other)))
		goto out;
	if (!requester)
		check_responder(c, rcq, may_lose);
	if (strcmp(other, "ok") && !why[0])
		fail("the requester: %s", other);
	if (barrier(c->n, "verdict", why[0] ? why : "ok", other, sizeof(other)))
		goto out;
	if (strcmp(other, "ok") && !why[0])
		fail("the %s: %s", requester ? "responder" : "requester", other);
out:
	if (before && after) {
		/* the kernel's last retransmissions settle before the counters */
		ix_sleep_us(20000);
		read_ctrs(after);
		judge_ctrs(before, after, ctrtxt, sizeof(ctrtxt));
	}
	if (qp && ql_qp_destroy(qp))
		fail("qp_destroy: %s", ql_error_detail());
	if (scq && ql_cq_destroy(scq))
		fail("cq_destroy: %s", ql_error_detail());
	if (rcq && ql_cq_destroy(rcq))
		fail("cq_destroy: %s", ql_error_detail());
	free(before);
	free(after);
	printf("case %-2d %-22s side=%c %-9s rc=%d seconds=%.2f%s%s%s%s\n", c->n, c->name, cfg.side,
	       requester ? "requester" : "responder", why[0] ? 1 : 0, now_s() - t0,
	       ctrtxt[0] ? " kernel:" : "", ctrtxt, why[0] ? " FAIL: " : "", why);
	fflush(stdout);
	return why[0] ? 1 : 0;
}

/* ---- capture ------------------------------------------------------------- */

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint32_t crc32_le(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
	}
	return crc;
}

/* RoCEv2 ICRC over an IPv4 packet (IP header to the end of the payload):
 * CRC-32 of 8 bytes of 0xff, the IP header with TOS, TTL and checksum set
 * to ones, the UDP header with its checksum set to ones, the BTH with
 * its reserved byte (resv8a) set to ones, and the rest; inverted. */
static uint32_t icrc_ipv4(const uint8_t *ip, size_t len)
{
	static uint8_t m[9000];
	size_t ihl = (size_t)(ip[0] & 15) * 4;
	uint32_t crc;

	if (len > sizeof(m) || len < ihl + 8 + 12 + 4)
		return 0;
	memcpy(m, ip, len - 4);
	m[1] = 0xff;
	m[8] = 0xff;
	m[10] = m[11] = 0xff;
	m[ihl + 6] = m[ihl + 7] = 0xff;
	m[ihl + 8 + 4] = 0xff;
	crc = crc32_le(0xffffffffu, (const uint8_t *)"\xff\xff\xff\xff\xff\xff\xff\xff", 8);
	crc = crc32_le(crc, m, len - 4);
	return ~crc;
}

static const char *opcode_name(uint8_t op)
{
	static const char *const rc[] = {
		[0x00] = "RC_SEND_FIRST",
		[0x01] = "RC_SEND_MIDDLE",
		[0x02] = "RC_SEND_LAST",
		[0x03] = "RC_SEND_LAST_WITH_IMMEDIATE",
		[0x04] = "RC_SEND_ONLY",
		[0x05] = "RC_SEND_ONLY_WITH_IMMEDIATE",
		[0x06] = "RC_RDMA_WRITE_FIRST",
		[0x07] = "RC_RDMA_WRITE_MIDDLE",
		[0x08] = "RC_RDMA_WRITE_LAST",
		[0x09] = "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
		[0x0a] = "RC_RDMA_WRITE_ONLY",
		[0x0b] = "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
		[0x0c] = "RC_RDMA_READ_REQUEST",
		[0x0d] = "RC_RDMA_READ_RESPONSE_FIRST",
		[0x0e] = "RC_RDMA_READ_RESPONSE_MIDDLE",
		[0x0f] = "RC_RDMA_READ_RESPONSE_LAST",
		[0x10] = "RC_RDMA_READ_RESPONSE_ONLY",
		[0x11] = "RC_ACKNOWLEDGE",
		[0x12] = "RC_ATOMIC_ACKNOWLEDGE",
		[0x13] = "RC_COMPARE_SWAP",
		[0x14] = "RC_FETCH_ADD",
	};
	static char uc[64];

	if (op <= 0x14)
		return rc[op];
	if (op >= 0x20 && op <= 0x2b && rc[op - 0x20]) {
		snprintf(uc, sizeof(uc), "UC_%s", rc[op - 0x20] + 3);
		return uc;
	}
	return "OTHER";
}

static int capture(const char *ifname, const char *dir, const char *src, double seconds)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP) };
	static uint8_t frame[10000];
	bool seen[256] = { false };
	struct in_addr want = { 0 };
	double end = now_s() + seconds;
	unsigned long total = 0, kept = 0, bad_icrc = 0;
	int fd;

	if (src && inet_pton(AF_INET, src, &want) != 1) {
		fprintf(stderr, "capture: bad --capture-src %s\n", src);
		return 2;
	}
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	if (!sll.sll_ifindex) {
		fprintf(stderr, "capture: no interface %s\n", ifname);
		return 2;
	}
	fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sll, sizeof(sll))) {
		fprintf(stderr, "capture: AF_PACKET on %s: %s\n", ifname, strerror(errno));
		return 2;
	}
	/* the guest is slow: room for every packet of a case between reads */
	{
		int sz = 16 << 20;

		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("capture: listening on %s\n", ifname);
	fflush(stdout);
	while (!stop && now_s() < end) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		const uint8_t *ip = frame, *udp, *bth;
		size_t ihl, len;
		uint32_t icrc, wire;
		ssize_t n;
		char path[4200];
		FILE *f;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = recv(fd, frame, sizeof(frame), MSG_DONTWAIT);
		if (n < 20 || (ip[0] >> 4) != 4 || ip[9] != IPPROTO_UDP)
			continue;
		ihl = (size_t)(ip[0] & 15) * 4;
		len = (size_t)ip[2] << 8 | ip[3];
		if (len > (size_t)n || len < ihl + 8 + 12 + 4)
			continue;
		udp = ip + ihl;
		if (((size_t)udp[2] << 8 | udp[3]) != IX_ROCE_PORT)
			continue;
		if (src && memcmp(ip + 12, &want, 4))
			continue;
		bth = udp + 8;
		total++;
		icrc = icrc_ipv4(ip, len);
		wire = (uint32_t)ip[len - 4] | (uint32_t)ip[len - 3] << 8 |
		       (uint32_t)ip[len - 2] << 16 | (uint32_t)ip[len - 1] << 24;
		if (icrc != wire)
			bad_icrc++;
		if (seen[bth[0]])
			continue;
		seen[bth[0]] = true;
		kept++;
		snprintf(path, sizeof(path), "%s/%02x-%s.txt", dir, bth[0], opcode_name(bth[0]));
		for (char *p = path + strlen(dir); *p; p++)
			*p = (char)tolower((unsigned char)*p);
		f = fopen(path, "w");
		if (!f) {
			fprintf(stderr, "capture: %s: %s\n", path, strerror(errno));
			continue;
		}
		fprintf(f, "# A RoCEv2 packet sent by Linux Soft-RoCE (rdma_rxe), captured on %s\n",
			ifname);
		fprintf(f, "# by tests/udp_rxe_interop --capture (tests/rxe/guest-init.sh).\n");
		fprintf(f, "opcode 0x%02x %s\n", bth[0], opcode_name(bth[0]));
		fprintf(f, "ip_src %u.%u.%u.%u\nip_dst %u.%u.%u.%u\n", ip[12], ip[13], ip[14],
			ip[15], ip[16], ip[17], ip[18], ip[19]);
		fprintf(f, "ip_id 0x%04x\nip_tos 0x%02x\nip_ttl %u\nip_flags_frag 0x%04x\n",
			(unsigned)ip[4] << 8 | ip[5], ip[1], ip[8], (unsigned)ip[6] << 8 | ip[7]);
		fprintf(f, "ip_total_length %zu\nip_checksum 0x%04x\n", len,
			(unsigned)ip[10] << 8 | ip[11]);
		fprintf(f, "udp_sport %u\nudp_dport %u\nudp_length %u\nudp_checksum 0x%04x\n",
			(unsigned)udp[0] << 8 | udp[1], (unsigned)udp[2] << 8 | udp[3],
			(unsigned)udp[4] << 8 | udp[5], (unsigned)udp[6] << 8 | udp[7]);
		fprintf(f, "icrc_on_wire %02x%02x%02x%02x\n", ip[len - 4], ip[len - 3], ip[len - 2],
			ip[len - 1]);
		fprintf(f, "icrc_computed 0x%08x (stored least significant byte first)\n", icrc);
		fprintf(f, "icrc_valid %s\n", icrc == wire ? "yes" : "no");
		fprintf(f,
			"# the IPv4 packet, from its header to the ICRC, 16 bytes a line\nhex\n");
		for (size_t j = 0; j < len; j++)
			fprintf(f, "%02x%s", ip[j], (j % 16 == 15 || j + 1 == len) ? "\n" : "");
		fclose(f);
	}
	printf("capture: %lu RoCEv2 packets, %lu opcodes kept, %lu with an ICRC that does not "
	       "verify\n",
	       total, kept, bad_icrc);
	close(fd);
	return bad_icrc || !total ? 1 : 0;
}

/* --verify-vectors DIR: each *.txt of DIR (the --capture format) holds a
 * packet that the codec parses and whose IPv4 Identification it solves
 * from the ICRC (a UDP socket is never told it), and whose ICRC,
 * recomputed here from its hex, is the one on the wire, its `icrc_valid`
 * line saying yes. */
static int verify_vectors(const char *dir)
{
	char cmd[4200], path[4200];
	int files = 0, bad = 0;
	FILE *ls;

	snprintf(cmd, sizeof(cmd), "ls '%s'/*.txt 2>/dev/null", dir);
	ls = popen(cmd, "r");
	if (!ls)
		return 2;
	while (fgets(path, sizeof(path), ls)) {
		static uint8_t pkt[10000];
		char line[256];
		size_t len = 0;
		bool hex = false, valid = false;
		uint32_t wire;
		FILE *f;

		path[strcspn(path, "\n")] = '\0';
		f = fopen(path, "r");
		if (!f)
			continue;
		files++;
		while (fgets(line, sizeof(line), f)) {
			if (!strcmp(line, "icrc_valid yes\n"))
				valid = true;
			else if (!strcmp(line, "hex\n"))
				hex = true;
			else if (hex)
				for (char *p = line;
				     isxdigit((unsigned char)p[0]) &&
				     isxdigit((unsigned char)p[1]) && len < sizeof(pkt);
				     p += 2) {
					unsigned v;

					sscanf(p, "%2x", &v);
					pkt[len++] = (uint8_t)v;
				}
		}
		fclose(f);
		if (len >= 40 && len <= sizeof(pkt)) {
			/* the codec: parses it, and finds the IPv4 Identification
			 * that makes its ICRC valid, which must be the one sent */
			size_t ihl = (size_t)(pkt[0] & 15) * 4;
			struct roce_addr ra = { .family = AF_INET };
			struct roce_pkt rp;
			uint16_t solved = 0;
			int pr, sr;

			memcpy(ra.src, pkt + 12, 4);
			memcpy(ra.dst, pkt + 16, 4);
			ra.sport = (uint16_t)(pkt[ihl] << 8 | pkt[ihl + 1]);
			ra.dport = (uint16_t)(pkt[ihl + 2] << 8 | pkt[ihl + 3]);
			pr = ql__roce_parse(pkt + ihl + 8, len - ihl - 8, &rp);
			sr = ql__roce_icrc_solve_id(pkt + ihl + 8, len - ihl - 8, &ra, &solved);
			if (pr || sr || solved != ((uint16_t)(pkt[4] << 8 | pkt[5]))) {
				printf("FAIL: %s: ql__roce_parse %d, ql__roce_icrc_solve_id %d (id 0x%04x, sent "
				       "0x%02x%02x)\n",
				       path, pr, sr, solved, pkt[4], pkt[5]);
				bad++;
				continue;
			}
		}
		wire = len >= 4 ? ((uint32_t)pkt[len - 4] | (uint32_t)pkt[len - 3] << 8 |
				   (uint32_t)pkt[len - 2] << 16 | (uint32_t)pkt[len - 1] << 24) :
				  0;
		if (len < 40 || ((size_t)pkt[2] << 8 | pkt[3]) != len || !valid ||
		    icrc_ipv4(pkt, len) != wire) {
			printf("FAIL: %s: %zu bytes, icrc 0x%08x on the wire, 0x%08x computed%s\n",
			       path, len, wire, len >= 40 ? icrc_ipv4(pkt, len) : 0,
			       valid ? "" : ", not marked valid");
			bad++;
		}
	}
	pclose(ls);
	printf("%d packets, %d with an ICRC that does not verify\n", files, bad);
	return bad || !files ? 1 : 0;
}

/* ---- main -------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: udp_rxe_interop --side a|b --uri URI --rdv DIR [--cases SUBSTRING]\n"
		"                       [--count N] [--lossy-side a|b] [--timeout SEC] [--corrupt]\n"
		"                       [--skip SUBSTRING]\n"
		"       udp_rxe_interop --capture IFACE --capture-dir DIR [--capture-src IPV4]\n"
		"                       [--capture-seconds SEC]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "side", required_argument, NULL, 's' },
		{ "uri", required_argument, NULL, 'u' },
		{ "rdv", required_argument, NULL, 'r' },
		{ "cases", required_argument, NULL, 'c' },
		{ "count", required_argument, NULL, 'n' },
		{ "lossy-side", required_argument, NULL, 'l' },
		{ "timeout", required_argument, NULL, 't' },
		{ "corrupt", no_argument, NULL, 'X' },
		{ "skip", required_argument, NULL, 'K' },
		{ "capture", required_argument, NULL, 'C' },
		{ "capture-dir", required_argument, NULL, 'D' },
		{ "capture-src", required_argument, NULL, 'S' },
		{ "capture-seconds", required_argument, NULL, 'T' },
		{ "verify-vectors", required_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *cap_if = NULL, *cap_dir = ".", *cap_src = NULL;
	double cap_s = 600;
	static struct ix_case cases[64];
	int ncases = 0, failed = 0, ran = 0, skipped = 0, o, ret;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			cfg.side = optarg[0];
			break;
		case 'u':
			cfg.uri = optarg;
			break;
		case 'r':
			cfg.rdv = optarg;
			break;
		case 'c':
			cfg.pattern = optarg;
			break;
		case 'n':
			cfg.count = atoi(optarg);
			break;
		case 'l':
			cfg.lossy = optarg[0];
			break;
		case 't':
			cfg.timeout_s = atof(optarg);
			break;
		case 'X':
			cfg.corrupt = true;
			break;
		case 'K':
			cfg.skip = optarg;
			break;
		case 'C':
			cap_if = optarg;
			break;
		case 'D':
			cap_dir = optarg;
			break;
		case 'S':
			cap_src = optarg;
			break;
		case 'T':
			cap_s = atof(optarg);
			break;
		case 'V':
			return verify_vectors(optarg);
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (cap_if)
		return capture(cap_if, cap_dir, cap_src, cap_s);
	if ((cfg.side != 'a' && cfg.side != 'b') || !cfg.uri || !cfg.rdv || cfg.count < 1 ||
	    cfg.count > IX_MAX_COUNT || (cfg.lossy && cfg.lossy != 'a' && cfg.lossy != 'b') ||
	    cfg.timeout_s <= 0) {
		usage(stderr);
		return 2;
	}
	cfg.other = cfg.side == 'a' ? 'b' : 'a';
	if (!strncmp(cfg.uri, "ibv://", 6))
		snprintf(cfg.ibv_dev, sizeof(cfg.ibv_dev), "%.*s", (int)strcspn(cfg.uri + 6, ":?"),
			 cfg.uri + 6);

	for (int r = 0; r < 2; r++) {
		static const enum ix_op rc_ops[] = { OP_WRITE,	   OP_READ,    OP_SEND,
						     OP_WRITE_IMM, OP_CMP_SWP, OP_FETCH_ADD };
		static const enum ix_op uc_ops[] = { OP_SEND, OP_WRITE, OP_WRITE_IMM };

		for (int t = 0; t < 2; t++) {
			const enum ix_op *ops = t ? uc_ops : rc_ops;
			int nops = t ? 3 : 6;

			for (int k = 0; k < nops; k++) {
				struct ix_case *c = &cases[ncases];

				c->n = ncases;
				c->type = t ? IBV_QPT_UC : IBV_QPT_RC;
				c->op = ops[k];
				c->req = (char)('a' + r);
				snprintf(c->name, sizeof(c->name), "%s-%s-req%c", t ? "uc" : "rc",
					 op_names[ops[k]], c->req);
				ncases++;
			}
		}
	}

	ret = ql_device_open(cfg.uri, &dev);
	ix_dev = ret ? NULL : dev;
	if (ret) {
		fprintf(stderr, "udp_rxe_interop: open %s: %s\n", cfg.uri, ql_error_detail());
		return 2;
	}
	if (ql_pd_alloc(dev, &pd) || ql_pd_mem_alloc(pd, IX_BUF_LEN, (void **)&buf) ||
	    ql_mr_reg(pd, buf, IX_BUF_LEN,
		      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_ATOMIC,
		      &mr)) {
		fprintf(stderr, "udp_rxe_interop: setup on %s: %s\n", cfg.uri, ql_error_detail());
		return 2;
	}
	printf("side %c on %s: %d messages a case, sizes 8/1000/4113/16387, lossy side %c%s%s\n",
	       cfg.side, cfg.uri, cfg.count, cfg.lossy ? cfg.lossy : '-',
	       cfg.ibv_dev[0] ? ", kernel counters of " : "", cfg.ibv_dev);
	fflush(stdout);
	for (int i = 0; i < ncases; i++) {
		if (cfg.pattern && !strstr(cases[i].name, cfg.pattern))
			continue;
		if (cfg.skip && strstr(cases[i].name, cfg.skip)) {
			printf("skipped %-2d %s (--skip %s)\n", cases[i].n, cases[i].name,
			       cfg.skip);
			skipped++;
			continue;
		}
		ran++;
		failed += run_case(&cases[i]);
		if (peer_gone) {
			printf("the other side is gone: the remaining cases are not run\n");
			break;
		}
	}
	if (cfg.ibv_dev[0] && cfg.lossy)
		printf("kernel recovery over the run: as responder (duplicate_request + "
		       "out_of_seq_request) %" PRIu64
		       ", as requester (completer_retry_err + rcvd_seq_err) %" PRIu64 "\n",
		       total_kernel_recovery[0], total_kernel_recovery[1]);
	printf("summary side=%c cases=%d skipped=%d failed=%d\n", cfg.side, ran, skipped, failed);
	ql_mr_dereg(mr);
	ql_pd_mem_free(pd, buf);
	ql_pd_free(pd);
	ix_dev = NULL;
	ql_device_close(dev);
	return failed || !ran ? 1 : 0;
}
