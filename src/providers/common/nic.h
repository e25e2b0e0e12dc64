/* SPDX-License-Identifier: MIT */
/*
 * nic: the PD/MR/CQ/QP bookkeeping the two software NICs (src/providers/soft
 * and src/providers/sudp) share, as functions (soft_nic.h holds the inline
 * checks of their hot paths). Set-up paths only: no function here is called
 * by post, poll or the NIC's packet path.
 */
#ifndef QL_PROVIDERS_NIC_H
#define QL_PROVIDERS_NIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qlink/verbs.h"

#define QL__NIC_HIDDEN __attribute__((visibility("hidden")))

/* The smallest power of two >= v (1 for 0): queue and CQ ring sizes. */
QL__NIC_HIDDEN uint32_t ql__nic_pow2_at_least(uint32_t v);

/* The checks of ql_mr_reg a software NIC adds to the verbs layer's: length
 * within max_mr_size (2^46) and only access flags it implements (LOCAL_WRITE,
 * REMOTE_WRITE/READ/ATOMIC, RELAXED_ORDERING). 0, or -EINVAL / -EOPNOTSUPP
 * with a detail naming `provider`. */
QL__NIC_HIDDEN int ql__nic_mr_check(size_t length, int access, const char *provider);

/* The keys of a new registration of MR slot idx (idx < 2^idx_bits, idx_bits
 * <= 19): the slot's epoch (*epoch) advances, and lkey and rkey are idx
 * under tags of the epoch keyed by secret[0] and secret[1] (a keyed
 * bijection: the keys differ from registration to registration of one slot,
 * and one does not reveal the other without the secret); lkey != rkey. */
QL__NIC_HIDDEN void ql__nic_mr_keys(uint32_t *epoch, const uint32_t secret[2], uint32_t idx_bits,
				    uint32_t idx, uint32_t *lkey, uint32_t *rkey);

/* Whether one of the n SGEs names lkey with a non-zero length (what keeps
 * an MR from being deregistered while a posted work request names it). */
QL__NIC_HIDDEN bool ql__nic_sge_names_lkey(const struct ibv_sge *sg, uint32_t n, uint32_t lkey);

/* The same for a posted send work request: its SGEs unless it is inline
 * (an inline WR's data was copied when posted). */
QL__NIC_HIDDEN bool ql__nic_swr_names_lkey(const struct ibv_send_wr *wr, uint32_t lkey);

/* ql_qp_create's checks of a software NIC, in their order around the
 * provider's own CQ check: the QP type (RC and UC; -EOPNOTSUPP naming
 * `provider`), then the capabilities (1..max_wr WRs per queue, at most
 * max_sge SGEs per WR, at most max_inline inline bytes; -EINVAL). */
QL__NIC_HIDDEN int ql__nic_qp_type_check(enum ibv_qp_type type, const char *provider);
QL__NIC_HIDDEN int ql__nic_qp_cap_check(const struct ibv_qp_cap *cap, int max_wr, int max_sge,
					int max_inline);

#endif
