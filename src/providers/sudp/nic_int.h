/* SPDX-License-Identifier: MIT */
/*
 * soft+udp provider: the NIC's internals, split by role as kernel rxe's
 * (rxe_req.c, rxe_resp.c, rxe_comp.c):
 *
 *   req.c   requester: send queue -> packets, go-back-N
 *   resp.c  responder: requests from the peer -> memory, receive WQEs, ACK/NAK
 *   comp.c  completer: ACKs and responses -> completions, the retry timer, flushes
 *   wire.c  the wire: transmit batch (sendmmsg), receive (recvmmsg) and validation
 *   nic.c   the engine: one round of all of it (caller or NIC thread)
 *
 * All of it runs with the device's NIC flag held (sudp_dev_lock): one
 * context at a time, whichever progresses (docs/progress.md).
 */
#ifndef QL_SUDP_NIC_INT_H
#define QL_SUDP_NIC_INT_H

#include <time.h>

#include "providers/sudp/sudp.h"

#define SUDP_AETH_ACK ROCE_AETH_ACK(ROCE_AETH_CREDITS_INVALID)

static inline uint64_t sudp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint32_t sudp_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & ROCE_PSN_MASK;
}

static inline bool sudp_is_rd_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* local ACK timeout: 4.096 us * 2^timeout; 0 means infinite */
static inline uint64_t sudp_timeout_ns(const struct sudp_qp *qp)
{
	return qp->attr.timeout ? 4096ull << qp->attr.timeout : 0;
}

/* comp.c: completions, flushes, what the responder answers, the timer */
SUDP_HIDDEN void ql__sudp_qp_to_err(struct sudp_qp *qp);
SUDP_HIDDEN void ql__sudp_complete_send(struct sudp_qp *qp, uint64_t idx, enum ibv_wc_status st,
					uint32_t byte_len);
SUDP_HIDDEN void ql__sudp_complete_recv(struct sudp_qp *qp, enum ibv_wc_status st,
					enum ibv_wc_opcode op, uint32_t byte_len, bool imm,
					uint32_t imm_host);
SUDP_HIDDEN bool ql__sudp_flush(struct sudp_qp *qp, bool rq);
SUDP_HIDDEN void ql__sudp_ack_upto(struct sudp_qp *qp, uint32_t apsn);
SUDP_HIDDEN void ql__sudp_on_timeout(struct sudp_qp *qp);
SUDP_HIDDEN void ql__sudp_rx_ack(struct sudp_qp *qp, const struct roce_pkt *p);
SUDP_HIDDEN void ql__sudp_rx_read_resp(struct sudp_qp *qp, const struct roce_pkt *p);
SUDP_HIDDEN void ql__sudp_rx_atomic_ack(struct sudp_qp *qp, const struct roce_pkt *p);

/* req.c: the requester; a local SGE list (the application's: a send WR's
 * or a receive WQE's) against the MR table (*dev: the OR of their MRs'
 * device-memory tags) */
SUDP_HIDDEN enum ibv_wc_status ql__sudp_check_local(const struct sudp_qp *qp,
						    const struct ibv_sge *sg, int n,
						    bool need_write, uint32_t *dev);
/* The same list as a tagged list (providers/common/devmem.h) in out. */
SUDP_HIDDEN void ql__sudp_tagged(const struct sudp_qp *qp, const struct ibv_sge *sg, int n,
				 struct ibv_sge *out);
SUDP_HIDDEN void ql__sudp_arm_timer(struct sudp_qp *qp);
SUDP_HIDDEN void ql__sudp_fail_head(struct sudp_qp *qp, enum ibv_wc_status st);
SUDP_HIDDEN void ql__sudp_seek_forward(struct sudp_qp *qp, uint32_t psn);
SUDP_HIDDEN void ql__sudp_go_back(struct sudp_qp *qp, uint32_t psn);
SUDP_HIDDEN bool ql__sudp_req_tx(struct sudp_qp *qp);

/* resp.c: the responder (op: the request's operation, checked by wire.c) */
SUDP_HIDDEN void ql__sudp_rx_request(struct sudp_qp *qp, const struct roce_pkt *p, uint8_t op);

/* wire.c: transmit and receive */
SUDP_HIDDEN void ql__sudp_tx_flush(struct sudp_device *dev);
/* (gpu: sg names GPU device memory, or flat's device-memory tag; a copy
 * the driver fails is a packet lost on the wire) */
SUDP_HIDDEN void ql__sudp_tx_pkt(struct sudp_qp *qp, struct roce_pkt *p, const struct ibv_sge *sg,
				 int nsge, uint64_t off, const uint8_t *flat, uint32_t gpu);
SUDP_HIDDEN bool ql__sudp_fault_drain(struct sudp_device *dev, struct roce_fault *f);
SUDP_HIDDEN void ql__sudp_send_aeth(struct sudp_qp *qp, uint8_t opcode, uint8_t syndrome,
				    uint32_t psn);
SUDP_HIDDEN void ql__sudp_send_ack_now(struct sudp_qp *qp);
SUDP_HIDDEN void ql__sudp_flush_ack(struct sudp_qp *qp);
SUDP_HIDDEN void ql__sudp_rx_datagram(struct sudp_device *dev, const uint8_t *buf, size_t len,
				      const struct sockaddr_storage *from);
/* one recvmmsg of up to SUDP_BATCH datagrams, each handled: how many */
SUDP_HIDDEN int ql__sudp_rx_batch(struct sudp_device *dev);

#endif
