/* SPDX-License-Identifier: MIT */
/*
 * soft_nic: what the two software NICs (the soft provider, src/providers/soft, and
 * soft+udp, src/providers/sudp) share below their wires, inline for their
 * hot paths: the checks of a posted work request, the gather and scatter of
 * a payload over SGEs and the completion opcode of a work request (the MR keys
 * are in nic.h).
 */
#ifndef QL_PROVIDERS_SOFT_NIC_H
#define QL_PROVIDERS_SOFT_NIC_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "qlink/verbs.h"

/* The checks of ibv_post_send both software NICs make before a WR is
 * taken (the IBTA rules libibverbs' providers apply): QP state, opcode for
 * the QP type, SGE count, inline size, and room in the send queue
 * (`outstanding` WRs posted and not yet retired). 0, -EINVAL or -ENOMEM. */
static inline __attribute__((always_inline)) int
ql__send_wr_check(enum ibv_qp_state state, enum ibv_qp_type type, const struct ibv_qp_cap *cap,
		  uint64_t outstanding, const struct ibv_send_wr *wr)
{
	switch (state) {
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
	case IBV_QPS_SQE:
	case IBV_QPS_ERR:
		break;
	default:
		return -EINVAL;
	}
	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		break;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		if (type != IBV_QPT_RC || (wr->send_flags & IBV_SEND_INLINE))
			return -EINVAL;
		if (wr->opcode != IBV_WR_RDMA_READ && wr->num_sge != 1)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > cap->max_send_sge)
		return -EINVAL;
	if (wr->send_flags & IBV_SEND_INLINE) {
		uint64_t len = 0;

		for (int i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		if (len > cap->max_inline_data)
			return -EINVAL;
	}
	if (outstanding >= cap->max_send_wr)
		return -ENOMEM;
	return 0;
}

/* Copy bytes [off, off+len) of the concatenated SGE list to dst (the
 * caller checked that the list holds them). */
static inline __attribute__((always_inline)) void
ql__sge_gather(uint8_t *dst, const struct ibv_sge *sg, int n, uint64_t off, uint64_t len)
{
	if (__builtin_expect(n == 1, 1)) {
		memcpy(dst, (const uint8_t *)(uintptr_t)sg[0].addr + off, len);
		return;
	}
	for (int i = 0; i < n && len; i++) {
		uint64_t l = sg[i].length, c;

		if (off >= l) {
			off -= l;
			continue;
		}
		c = l - off < len ? l - off : len;
		memcpy(dst, (const uint8_t *)(uintptr_t)sg[i].addr + off, c);
		dst += c;
		len -= c;
		off = 0;
	}
}

/* Copy src into bytes [off, off+len) of the concatenated SGE list. */
static inline void ql__sge_scatter(const struct ibv_sge *sg, int n, uint64_t off,
				   const uint8_t *src, uint64_t len)
{
	for (int i = 0; i < n && len; i++) {
		uint64_t l = sg[i].length, c;

		if (off >= l) {
			off -= l;
			continue;
		}
		c = l - off < len ? l - off : len;
		memcpy((uint8_t *)(uintptr_t)sg[i].addr + off, src, c);
		src += c;
		len -= c;
		off = 0;
	}
}

/* The completion opcode of a send work request (IBV_WC_SEND for both
 * SENDs). */
static inline enum ibv_wc_opcode ql__wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	default:
		return IBV_WC_SEND;
	}
}

/* A posted inline WR's payload copied into buf, its slot in the QP's
 * inline area (inline data belongs to the QP from the moment of posting),
 * and sg[0] made to name it (lkey 0). Returns the payload's length; the WR
 * keeps one SGE, or none for an empty payload (*num_sge). */
static inline uint32_t ql__inline_take(uint8_t *buf, const struct ibv_send_wr *wr,
				       struct ibv_sge *sg, int *num_sge)
{
	uint32_t len = 0;

	for (int i = 0; i < wr->num_sge; i++) {
		memcpy(buf + len, (const void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		len += wr->sg_list[i].length;
	}
	sg[0].addr = (uint64_t)(uintptr_t)buf;
	sg[0].length = len;
	sg[0].lkey = 0;
	*num_sge = len ? 1 : 0;
	return len;
}

#endif
