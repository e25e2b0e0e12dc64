// SPDX-License-Identifier: MIT
/* What the software NICs share beyond soft_nic.h's inline checks (nic.h). */
#include "providers/common/nic.h"

uint32_t ql__nic_pow2_at_least(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}
