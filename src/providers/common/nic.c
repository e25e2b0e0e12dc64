// SPDX-License-Identifier: MIT
/* What the software NICs share beyond soft_nic.h's inline checks (nic.h). */
#include "providers/common/nic.h"

#include <errno.h>

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

int ql__nic_qp_type_check(enum ibv_qp_type type, const char *provider)
{
	if (type != IBV_QPT_RC && type != IBV_QPT_UC)
		return ql_error_set(-EOPNOTSUPP, "%s: QP type %d not supported (RC and UC are)",
				    provider, type);
	return 0;
}

int ql__nic_qp_cap_check(const struct ibv_qp_cap *cap, int max_wr, int max_sge, int max_inline)
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
