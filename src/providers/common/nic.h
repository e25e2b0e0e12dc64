/* SPDX-License-Identifier: MIT */
/*
 * nic: the PD/MR/CQ/QP bookkeeping the two software NICs (src/providers/soft
 * and src/providers/sudp) share, as functions (soft_nic.h holds the inline
 * checks of their hot paths). Set-up paths only: no function here is called
 * by post, poll or the NIC's packet path.
 */
#ifndef QL_PROVIDERS_NIC_H
#define QL_PROVIDERS_NIC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qlink/verbs.h"
#include "verbs/provider.h"

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

struct ql__nic_limits;

/* All of ql_qp_create's checks of a software NIC: the QP type, both CQs
 * given and of the QP's device (the provider says: cqs_ours), then the
 * capabilities against the limits. */
QL__NIC_HIDDEN int ql__nic_qp_create_check(const struct ql_qp_init_attr *ia, bool cqs_ours,
					   const struct ql__nic_limits *lim, const char *provider);

/* The verbs layer's base of a new QP of a software NIC (its post ops, device,
 * PD and type); the QP number is the provider's. */
QL__NIC_HIDDEN void ql__nic_qp_base_init(struct ql_qp *qp, const struct ql__qp_ops *ops,
					 struct ql_pd *pd, enum ibv_qp_type type);

/* Random bytes (the NICs' key secrets, QPNs, initial PSNs): getrandom,
 * which cannot fail once the pool is up; were it to, something that still
 * differs between processes, never a failure of the caller's set-up. */
QL__NIC_HIDDEN void ql__nic_random(void *buf, size_t len);
QL__NIC_HIDDEN uint32_t ql__nic_random_u32(void);

/* A software NIC's PD: an id (what MR entries and QPs are checked
 * against) and the counts behind ql_pd_free's -EBUSY. */
struct ql__nic_pd {
	struct ql_pd base;
	uint32_t id;
	uint32_t nmr;
	uint32_t nqp;
};

/* ql_pd_alloc/ql_pd_free of a software NIC: ids from *next_id, counts
 * read under the NIC's set-up lock `lock`; -EBUSY names `provider`. */
QL__NIC_HIDDEN int ql__nic_pd_alloc(struct ql_device *dev, pthread_mutex_t *lock, uint32_t *next_id,
				    struct ql_pd **out);
QL__NIC_HIDDEN int ql__nic_pd_free(struct ql_pd *pd, pthread_mutex_t *lock, const char *provider);

/* The limits a software NIC reports (ql_device_query). */
struct ql__nic_limits {
	const char *fw_ver;
	uint32_t max_qp; /* QP slots, of which numbers 0 and 1 are IB's special QPs */
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_cqe;
	uint32_t max_mr; /* MR slots, of which slot 0 is never used */
	uint32_t max_rd_atomic;
	uint32_t max_msg;
	uint32_t max_inline;
};

/* ql_device_query's answer of a software NIC with these limits, a 4096-byte
 * MTU port up on Ethernet; the caller then sets name, wire, active_mtu
 * (4096 here) and gid. */
QL__NIC_HIDDEN void ql__nic_query(struct ql_device_attr *a, const struct ql__nic_limits *lim);

/* A new registration of `mr` in the first free slot 1..nslots-1 of
 * `slots` (under the NIC's set-up lock): its keys (ql__nic_mr_keys), the
 * slot taken, the PD's count up, the base fields of `base` filled. -ENOMEM
 * naming `provider` when every slot is taken. */
QL__NIC_HIDDEN int ql__nic_mr_claim(void **slots, uint32_t nslots, uint32_t *epoch,
				    const uint32_t secret[2], uint32_t idx_bits, void *mr,
				    struct ql_mr *base, struct ql_pd *pd, void *addr, size_t length,
				    int access, const char *provider, uint32_t *idx);

/* ql_cq_create's check of cqe against the NIC's max_cqe. */
QL__NIC_HIDDEN int ql__nic_cq_check(int cqe, int max_cqe);

/* ql_qp_modify's attributes a software NIC keeps as given (in dst, its
 * ibv_qp_attr as ql_qp_query reports it): pkey index, port, path MTU,
 * PSNs (24 bits), timeout, retry counts, rd_atomic limits, SQD notify,
 * path migration state. What a NIC does beyond keeping them is its own. */
QL__NIC_HIDDEN void ql__nic_qp_attr_keep(struct ibv_qp_attr *dst, const struct ibv_qp_attr *a,
					 int mask);

/* ql_qp_query's answer of a software NIC from what it keeps. */
struct ql__nic_qp_view {
	const struct ibv_qp_attr *attr;
	enum ibv_qp_state state;
	struct ibv_qp_cap cap;
	struct ql_cq *send_cq, *recv_cq;
	enum ibv_qp_type type;
	int sq_sig_all;
	void *qp_context;
};
QL__NIC_HIDDEN void ql__nic_qp_query(const struct ql__nic_qp_view *v, struct ibv_qp_attr *a,
				     struct ql_qp_init_attr *ia);

/* Private anonymous memory for ql_pd_mem_alloc (a NIC whose peers need
 * not map it); -errno naming `provider`. */
QL__NIC_HIDDEN int ql__nic_mem_map(size_t length, const char *provider, void **addr);

#endif
