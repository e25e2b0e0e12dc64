// SPDX-License-Identifier: MIT
/* GPU device memory on the software NICs (devmem.h). */
#include "providers/common/devmem.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "qlink/error.h"
#include "util/cuda_drv.h"

int ql__nic_mem_tag(const void *addr, size_t length, const char *provider, uint32_t *tag)
{
	char why[256];
	int ord, ret;

	*tag = 0;
	ret = ql__cuda_mem_classify(addr, length, &ord);
	if (ret) {
		snprintf(why, sizeof(why), "%s", ql_error_detail());
		return ql_error_set(ret, "%s: ql_mr_reg: %s", provider, why);
	}
	if (ord >= 0)
		*tag = (uint32_t)ord + 1;
	return 0;
}

int ql__nic_copy(void *dst, uint32_t dtag, const void *src, uint32_t stag, size_t n)
{
	if (!(dtag | stag)) {
		memcpy(dst, src, n);
		return 0;
	}
	return ql__cuda_copy((int)(dtag ? dtag : stag) - 1, dst, dtag != 0, src, stag != 0, n);
}

int ql__nic_sg_copy(const struct ibv_sge *dst, int nd, uint64_t doff, const struct ibv_sge *src,
		    int ns, uint64_t soff, uint64_t len)
{
	int i = 0, j = 0;

	while (i < nd && doff >= dst[i].length)
		doff -= dst[i++].length;
	while (j < ns && soff >= src[j].length)
		soff -= src[j++].length;
	while (len) {
		uint64_t c = len;
		int ret;

		if (i >= nd || j >= ns)
			return -EIO; /* the caller's check says it cannot happen */
		if (dst[i].length - doff < c)
			c = dst[i].length - doff;
		if (src[j].length - soff < c)
			c = src[j].length - soff;
		ret = ql__nic_copy((uint8_t *)(uintptr_t)dst[i].addr + doff, dst[i].lkey,
				   (const uint8_t *)(uintptr_t)src[j].addr + soff, src[j].lkey,
				   (size_t)c);
		if (ret)
			return ret;
		doff += c;
		soff += c;
		len -= c;
		if (doff == dst[i].length) {
			i++;
			doff = 0;
		}
		if (soff == src[j].length) {
			j++;
			soff = 0;
		}
	}
	return 0;
}

int ql__nic_write_tagged(uint8_t *dst, uint32_t dtag, const struct ibv_sge *src, int ns,
			 uint64_t len)
{
	const struct ibv_sge d = { .addr = (uint64_t)(uintptr_t)dst,
				   .length = (uint32_t)len,
				   .lkey = dtag };
	uint64_t head = len < 8 ? len : len - 8;
	int ret;

	atomic_thread_fence(memory_order_release);
	ret = ql__nic_sg_copy(&d, 1, 0, src, ns, 0, head);
	if (ret || head == len)
		return ret;
	atomic_thread_fence(memory_order_release);
	return ql__nic_sg_copy(&d, 1, head, src, ns, head, 8);
}
