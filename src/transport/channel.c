/* SPDX-License-Identifier: MIT */
/* Channel calls that are not on the hot path. */
#include <errno.h>

#include <time.h>

#include "qlink/channel.h"

int ql_channel_register_memory(struct ql_channel *ch, void *addr, size_t len, uint32_t *lkey)
{
	if (!ch || !addr || !len || !lkey)
		return -EINVAL;
	return ((const struct ql__channel_head *)(const void *)ch)
		->ops->register_memory(ch, addr, len, lkey);
}

static uint64_t in_flight(const struct ql_channel_send_stats *s)
{
	uint64_t out = s->completed + s->dropped_rnr + s->dropped_peer;

	return s->posted > out ? s->posted - out : 0;
}

uint64_t ql_channel_drain_sends(struct ql_channel *ch, uint64_t timeout_ns)
{
	const struct ql__channel_ops *ops =
		ch ? ((const struct ql__channel_head *)(const void *)ch)->ops : NULL;
	struct ql_channel_send_stats s;
	struct timespec nap = { 0, 100000 }; /* 100 us */
	uint64_t waited = 0;

	if (!ops || !ops->reap_sends || ql_channel_send_stats(ch, &s))
		return 0;
	for (;;) {
		ops->reap_sends(ch);
		ql_channel_send_stats(ch, &s);
		/* a channel in error completes nothing more */
		if (!in_flight(&s) || ops->poll_errors(ch) || waited >= timeout_ns)
			return in_flight(&s);
		nanosleep(&nap, NULL);
		waited += (uint64_t)nap.tv_nsec;
	}
}

void ql_channel_destroy(struct ql_channel *ch)
{
	if (ch)
		((const struct ql__channel_head *)(const void *)ch)->ops->destroy(ch);
}
