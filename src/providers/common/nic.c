// SPDX-License-Identifier: MIT
/* What the software NICs share beyond soft_nic.h's inline checks (nic.h). */
#include "providers/common/nic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "qlink/error.h"
#include "qlink/verbs.h"

uint32_t ql__nic_pow2_at_least(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

int ql__nic_mr_check(size_t length, int access, const char *provider)
{
	const int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
			  IBV_ACCESS_RELAXED_ORDERING;

	if (length > (1ull << 46))
		return ql_error_set(-EINVAL, "ql_mr_reg: length exceeds max_mr_size");
	if (access & ~known)
		return ql_error_set(-EOPNOTSUPP, "ql_mr_reg: access flags 0x%x not supported by %s",
				    access & ~known, provider);
	return 0;
}

/* A keyed bijection on the low bits of mask (mask = 2^n - 1, n >= 13):
 * distinct epochs x of one MR slot give distinct tags, and a tag does not
 * reveal the others without the device's secret. */
static uint32_t key_tag(uint32_t x, uint32_t secret, uint32_t mask)
{
	x = (x + secret) & mask;
	x = (x * 0x9e3b5u) & mask;
	x ^= x >> 9;
	x = (x * 0x5a4c3u) & mask;
	x ^= x >> 7;
	return x ^ ((secret >> 12) & mask);
}

void ql__nic_mr_keys(uint32_t *epoch, const uint32_t secret[2], uint32_t idx_bits, uint32_t idx,
		     uint32_t *lkey, uint32_t *rkey)
{
	const uint32_t mask = (1u << (32 - idx_bits)) - 1;

	do {
		uint32_t ep = ++*epoch;

		*lkey = (key_tag(ep, secret[0], mask) << idx_bits) | idx;
		*rkey = (key_tag(ep, secret[1], mask) << idx_bits) | idx;
	} while (*lkey == *rkey);
}

bool ql__nic_sge_names_lkey(const struct ibv_sge *sg, uint32_t n, uint32_t lkey)
{
	for (uint32_t k = 0; k < n; k++)
		if (sg[k].lkey == lkey && sg[k].length)
			return true;
	return false;
}

bool ql__nic_swr_names_lkey(const struct ibv_send_wr *wr, uint32_t lkey)
{
	if ((wr->send_flags & IBV_SEND_INLINE) || wr->num_sge <= 0)
		return false;
	return ql__nic_sge_names_lkey(wr->sg_list, (uint32_t)wr->num_sge, lkey);
}

/* the QP types a software NIC makes: RC and UC */
static int qp_type_check(enum ibv_qp_type type, const char *provider)
{
	if (type != IBV_QPT_RC && type != IBV_QPT_UC)
		return ql_error_set(-EOPNOTSUPP, "%s: QP type %d not supported (RC and UC are)",
				    provider, type);
	return 0;
}

/* 1..max_wr WRs per queue, at most max_sge SGEs per WR, at most max_inline
 * inline bytes */
static int qp_cap_check(const struct ibv_qp_cap *cap, int max_wr, int max_sge, int max_inline)
{
	if (cap->max_send_wr < 1 || cap->max_send_wr > (uint32_t)max_wr || cap->max_recv_wr < 1 ||
	    cap->max_recv_wr > (uint32_t)max_wr)
		return ql_error_set(-EINVAL, "ql_qp_create: max_send_wr/max_recv_wr must be 1..%d",
				    max_wr);
	if (cap->max_send_sge > (uint32_t)max_sge || cap->max_recv_sge > (uint32_t)max_sge)
		return ql_error_set(-EINVAL, "ql_qp_create: at most %d SGEs per WR", max_sge);
	if (cap->max_inline_data > (uint32_t)max_inline)
		return ql_error_set(-EINVAL, "ql_qp_create: max_inline_data above %d", max_inline);
	return 0;
}

int ql__nic_qp_create_check(const struct ql_qp_init_attr *ia, bool cqs_ours,
			    const struct ql__nic_limits *lim, const char *provider)
{
	int ret = qp_type_check(ia->qp_type, provider);

	if (ret)
		return ret;
	if (!ia->send_cq || !ia->recv_cq || !cqs_ours)
		return ql_error_set(-EINVAL, "ql_qp_create: send_cq and recv_cq must be CQs of the "
					     "QP's device");
	return qp_cap_check(&ia->cap, (int)lim->max_qp_wr, (int)lim->max_sge, (int)lim->max_inline);
}

void ql__nic_qp_base_init(struct ql_qp *qp, const struct ql__qp_ops *ops, struct ql_pd *pd,
			  enum ibv_qp_type type)
{
	qp->head.ops = ops;
	qp->dev = pd->dev;
	qp->pd = pd;
	qp->qp_type = type;
}

uint32_t ql__nic_random_u32(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = (uint32_t)getpid() * 2654435761u ^ (uint32_t)(uintptr_t)&v;
	return v;
}

void ql__nic_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n <= 0) {
			for (size_t i = 0; i < len; i++)
				p[i] = (uint8_t)ql__nic_random_u32();
			return;
		}
		p += n;
		len -= (size_t)n;
	}
}

int ql__nic_pd_alloc(struct ql_device *dev, pthread_mutex_t *lock, uint32_t *next_id,
		     struct ql_pd **out)
{
	struct ql__nic_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return -ENOMEM;
	pd->base.dev = dev;
	pthread_mutex_lock(lock);
	pd->id = (*next_id)++;
	pthread_mutex_unlock(lock);
	*out = &pd->base;
	return 0;
}

int ql__nic_pd_free(struct ql_pd *p, pthread_mutex_t *lock, const char *provider)
{
	struct ql__nic_pd *pd = (struct ql__nic_pd *)p;
	uint32_t nmr, nqp;

	pthread_mutex_lock(lock);
	nmr = pd->nmr;
	nqp = pd->nqp;
	pthread_mutex_unlock(lock);
	if (nmr || nqp)
		return ql_error_set(-EBUSY, "%s: PD still has %u MRs and %u QPs", provider, nmr,
				    nqp);
	free(pd);
	return 0;
}

void ql__nic_query(struct ql_device_attr *a, const struct ql__nic_limits *lim)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->dev.fw_ver, sizeof(a->dev.fw_ver), "%s", lim->fw_ver);
	a->dev.max_mr_size = 1ull << 46;
	a->dev.page_size_cap = 4096;
	a->dev.max_qp = (int)lim->max_qp - 2; /* QP numbers 0 and 1 are the IB special QPs */
	a->dev.max_qp_wr = (int)lim->max_qp_wr;
	a->dev.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN;
	a->dev.max_sge = (int)lim->max_sge;
	a->dev.max_cq = 1 << 16;
	a->dev.max_cqe = (int)lim->max_cqe;
	a->dev.max_mr = (int)lim->max_mr - 1;
	a->dev.max_pd = 1 << 16;
	a->dev.max_qp_rd_atom = (int)lim->max_rd_atomic;
	a->dev.max_qp_init_rd_atom = (int)lim->max_rd_atomic;
	a->dev.max_res_rd_atom = (int)(lim->max_rd_atomic * (lim->max_qp - 2));
	a->dev.atomic_cap = IBV_ATOMIC_GLOB; /* CPU atomics on host memory */
	a->dev.max_pkeys = 1;
	a->dev.phys_port_cnt = 1;
	a->port.state = IBV_PORT_ACTIVE;
	a->port.max_mtu = IBV_MTU_4096;
	a->port.active_mtu = IBV_MTU_4096;
	a->port.gid_tbl_len = 1;
	a->port.max_msg_sz = lim->max_msg;
	a->port.pkey_tbl_len = 1;
	a->port.link_layer = IBV_LINK_LAYER_ETHERNET;
	a->port.phys_state = 5; /* LinkUp */
	a->max_inline_data = lim->max_inline;
}

int ql__nic_mr_claim(void **slots, uint32_t nslots, uint32_t *epoch, const uint32_t secret[2],
		     uint32_t idx_bits, void *mr, struct ql_mr *base, struct ql_pd *pd, void *addr,
		     size_t length, int access, const char *provider, uint32_t *idx)
{
	uint32_t i;

	for (i = 1; i < nslots && slots[i]; i++)
		;
	if (i == nslots)
		return ql_error_set(-ENOMEM, "%s: all %u memory regions in use", provider,
				    nslots - 1);
	ql__nic_mr_keys(&epoch[i], secret, idx_bits, i, &base->lkey, &base->rkey);
	slots[i] = mr;
	((struct ql__nic_pd *)pd)->nmr++;
	base->pd = pd;
	base->addr = addr;
	base->length = length;
	base->access = access;
	*idx = i;
	return 0;
}

int ql__nic_cq_check(int cqe, int max_cqe)
{
	if (cqe < 1 || cqe > max_cqe)
		return ql_error_set(-EINVAL, "ql_cq_create: cqe %d outside 1..%d", cqe, max_cqe);
	return 0;
}

void ql__nic_qp_attr_keep(struct ibv_qp_attr *dst, const struct ibv_qp_attr *a, int mask)
{
	if (mask & IBV_QP_PKEY_INDEX)
		dst->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		dst->port_num = a->port_num;
	if (mask & IBV_QP_PATH_MTU)
		dst->path_mtu = a->path_mtu;
	if (mask & IBV_QP_RQ_PSN)
		dst->rq_psn = a->rq_psn & 0xffffff;
	if (mask & IBV_QP_SQ_PSN)
		dst->sq_psn = a->sq_psn & 0xffffff;
	if (mask & IBV_QP_TIMEOUT)
		dst->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		dst->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		dst->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		dst->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		dst->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		dst->en_sqd_async_notify = a->en_sqd_async_notify;
	if (mask & IBV_QP_PATH_MIG_STATE)
		dst->path_mig_state = a->path_mig_state;
}

void ql__nic_qp_query(const struct ql__nic_qp_view *v, struct ibv_qp_attr *a,
		      struct ql_qp_init_attr *ia)
{
	*a = *v->attr;
	a->qp_state = v->state;
	a->cur_qp_state = v->state;
	a->cap = v->cap;
	a->sq_draining = 0;
	if (ia) {
		memset(ia, 0, sizeof(*ia));
		ia->send_cq = v->send_cq;
		ia->recv_cq = v->recv_cq;
		ia->cap = v->cap;
		ia->qp_type = v->type;
		ia->sq_sig_all = v->sq_sig_all;
		ia->qp_context = v->qp_context;
	}
}

int ql__nic_mem_map(size_t length, const char *provider, void **addr)
{
	void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return ql_error_set(-errno, "%s: mmap of %zu bytes: %s", provider, length,
				    strerror(errno));
	*addr = p;
	return 0;
}
