/* SPDX-License-Identifier: MIT */
/*
 * fault.h: fault injection in the soft+udp transmit path (tests only).
 *
 * Decides, per transmitted packet, whether to send it as is, drop it,
 * duplicate it, reorder it (hold it back until the next packet has gone),
 * delay it (hold it for delay_us), or corrupt one bit of it (after its ICRC
 * was computed, so the receiver's ICRC check must catch it). Each kind has a
 * rate; one seeded draw per packet picks at most one kind, so runs are
 * reproducible. drop_nth drops every Nth packet (as the soft provider's
 * option of the same name), drop_once drops packet N only.
 *
 * Pure logic, no allocation per packet: ql__roce_fault_init allocates the
 * pending queue (held, duplicated and corrupted copies) once; the NIC calls
 * ql__roce_fault_tx for each packet and sends the ones ql__roce_fault_next hands
 * back. One state per device or per QP; not thread-safe (one NIC thread).
 *
 *	int v = ql__roce_fault_tx(f, now, iov, n, &peer, peerlen);
 *	if (v == ROCE_FAULT_SEND) sendmsg(... iov ...);  // else consumed
 *	while ((q = ql__roce_fault_next(f, now))) { sendto(q->data, q->len, &q->peer); ql__roce_fault_pop(f); }
 *
 * docs/soft-udp.md lists the URI options (ql__roce_fault_parse).
 */
#ifndef QL_UDP_FAULT_H
#define QL_UDP_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

enum roce_fault_kind {
	ROCE_FAULT_DROP,
	ROCE_FAULT_DUP,
	ROCE_FAULT_REORDER,
	ROCE_FAULT_DELAY,
	ROCE_FAULT_CORRUPT,
	ROCE_FAULT_NKINDS
};

struct roce_fault_cfg {
	double rate[ROCE_FAULT_NKINDS]; /* 0..1 each, sum <= 1 */
	uint32_t delay_us;		/* hold time of a delayed packet (default 200) */
	uint32_t reorder_max_us; /* a reordered packet goes out at the latest after this (default 1000) */
	uint64_t seed;
	uint64_t drop_nth;    /* drop every Nth packet (N, 2N, ...), 0: off */
	uint64_t drop_once;   /* drop packet N (1-based) only, 0: off */
	uint32_t queue_slots; /* pending copies (default 64; URI key fault_slots) */
	uint32_t slot_bytes;  /* the largest packet a copy holds (default 9216) */
};

/* true when any fault is configured */
bool ql__roce_fault_cfg_on(const struct roce_fault_cfg *cfg);

/* Parses a URI query ("drop=0.01&dup=0.01&seed=7", no '?') into cfg, which
 * it first sets to the defaults. Keys: drop (alias loss), dup, reorder,
 * delay, corrupt (rates 0..1), delay_us, reorder_max_us, seed, drop_nth,
 * drop_once, fault_slots. Unknown keys are left to the caller when `unknown_ok` (so the
 * provider's own options can share the query), else -EINVAL. -EINVAL with a
 * detail (ql_error_set) on a bad value. */
int ql__roce_fault_parse(const char *query, bool unknown_ok, struct roce_fault_cfg *cfg);

/* a pending copy */
struct roce_fault_pkt {
	uint64_t due_ns; /* goes out at or after this time... */
	uint64_t after_tx; /* ...or once packet number after_tx + 1 went through ql__roce_fault_tx (reorder; 0: unused) */
	uint64_t seq; /* insertion order: due copies go out oldest first */
	bool busy;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	uint32_t len;
	uint8_t *data;
};

struct roce_fault {
	struct roce_fault_cfg cfg;
	uint64_t rng;
	uint64_t ntx; /* packets through ql__roce_fault_tx */
	uint64_t count[ROCE_FAULT_NKINDS];
	uint64_t queue_full; /* faults not applied (no free slot, or a packet over slot_bytes): sent as is */
	/* pending copies: cfg.queue_slots slots of cfg.slot_bytes */
	struct roce_fault_pkt *slots;
	uint8_t *mem;
	uint32_t used; /* busy slots */
	uint32_t cur;  /* the slot ql__roce_fault_next returned */
	uint64_t seq;
};

/* "drop", "dup", "reorder", "delay", "corrupt" */
const char *ql__roce_fault_kind_name(enum roce_fault_kind k);

/* 0, -ENOMEM, -EINVAL (with ql_error_set detail) */
int ql__roce_fault_init(struct roce_fault *f, const struct roce_fault_cfg *cfg);
void ql__roce_fault_fini(struct roce_fault *f);

enum { ROCE_FAULT_SEND = 0, ROCE_FAULT_CONSUMED = 1 };
/* One packet about to be sent (the whole UDP payload, ICRC included, in
 * iov). Returns ROCE_FAULT_SEND (send it now as is; a duplicate may have been
 * queued to follow, due at once) or ROCE_FAULT_CONSUMED (dropped, or copied
 * into the pending queue: held back, or corrupted in one bit other than BTH
 * byte 4, which the ICRC does not cover, and due at once). The caller's
 * buffers are never modified. */
int ql__roce_fault_tx(struct roce_fault *f, uint64_t now_ns, const struct iovec *iov, int n,
		      const void *peer, socklen_t peerlen);
/* the oldest pending copy that is due now, NULL if none */
const struct roce_fault_pkt *ql__roce_fault_next(struct roce_fault *f, uint64_t now_ns);
/* releases what ql__roce_fault_next returned */
void ql__roce_fault_pop(struct roce_fault *f);
/* the earliest due time among pending copies, UINT64_MAX if none (for the
 * NIC's poll timeout) */
uint64_t ql__roce_fault_next_due(const struct roce_fault *f);

#endif
