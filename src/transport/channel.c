/* SPDX-License-Identifier: MIT */
/* Channel calls that are not on the hot path. */
#include <errno.h>

#include "qlink/channel.h"

int ql_channel_register_memory(struct ql_channel *ch, void *addr, size_t len, uint32_t *lkey)
{
	if (!ch || !addr || !len || !lkey)
		return -EINVAL;
	return ((const struct ql__channel_head *)(const void *)ch)
		->ops->register_memory(ch, addr, len, lkey);
}

void ql_channel_destroy(struct ql_channel *ch)
{
	if (ch)
		((const struct ql__channel_head *)(const void *)ch)->ops->destroy(ch);
}
