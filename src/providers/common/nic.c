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
