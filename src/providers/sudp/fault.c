// SPDX-License-Identifier: MIT
/* Fault injection in the soft+udp transmit path (fault.h, docs/soft-udp.md). */
#include "providers/sudp/fault.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <qlink/error.h>

static const char *const kind_names[ROCE_FAULT_NKINDS] = {
	[ROCE_FAULT_DROP] = "drop",	  [ROCE_FAULT_DUP] = "dup",
	[ROCE_FAULT_REORDER] = "reorder", [ROCE_FAULT_DELAY] = "delay",
	[ROCE_FAULT_CORRUPT] = "corrupt",
};

const char *ql__roce_fault_kind_name(enum roce_fault_kind k)
{
	return (unsigned)k < ROCE_FAULT_NKINDS ? kind_names[k] : "?";
}

bool ql__roce_fault_cfg_on(const struct roce_fault_cfg *cfg)
{
	for (int k = 0; k < ROCE_FAULT_NKINDS; k++)
		if (cfg->rate[k] > 0)
			return true;
	return cfg->drop_nth || cfg->drop_once;
}

static void defaults(struct roce_fault_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->delay_us = 200;
	cfg->reorder_max_us = 1000;
	cfg->seed = 1;
	cfg->queue_slots = 64;
	cfg->slot_bytes = 9216;
}

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;
	if (*v < '0' || *v > '9')
		return -1;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 0);
	if (errno || *end)
		return -1;
	*out = n;
	return 0;
}

int ql__roce_fault_parse(const char *query, bool unknown_ok, struct roce_fault_cfg *cfg)
{
	defaults(cfg);
	if (!query)
		return 0;
	const char *s = query;
	while (*s) {
		char kv[128];
		size_t n = strcspn(s, "&");
		if (n >= sizeof(kv))
			return ql_error_set(-EINVAL, "soft+udp: option '%.*s...' too long", 32, s);
		memcpy(kv, s, n);
		kv[n] = 0;
		s += n;
		if (*s == '&')
			s++;
		if (!n)
			continue;
		char *val = strchr(kv, '=');
		if (!val) {
			if (unknown_ok)
				continue;
			return ql_error_set(-EINVAL, "soft+udp: option '%s' has no value", kv);
		}
		*val++ = 0;
		int kind = -1;
		for (int k = 0; k < ROCE_FAULT_NKINDS; k++)
			if (!strcmp(kv, kind_names[k]))
				kind = k;
		if (!strcmp(kv, "loss")) /* the soft provider's name for it */
			kind = ROCE_FAULT_DROP;
		if (kind >= 0) {
			char *end;
			errno = 0;
			double r = strtod(val, &end);
			if (errno || end == val || *end || !(r >= 0 && r <= 1))
				return ql_error_set(
					-EINVAL, "soft+udp: %s=%s: a rate is a number from 0 to 1",
					kv, val);
			cfg->rate[kind] = r;
			continue;
		}
		uint64_t u;
		uint64_t *u64 = NULL;
		uint32_t *u32 = NULL;
		uint64_t min = 0, max = UINT32_MAX;
		if (!strcmp(kv, "seed")) {
			u64 = &cfg->seed;
			max = UINT64_MAX;
		} else if (!strcmp(kv, "drop_nth")) {
			u64 = &cfg->drop_nth;
			min = 1;
			max = UINT64_MAX;
		} else if (!strcmp(kv, "drop_once")) {
			u64 = &cfg->drop_once;
			min = 1;
			max = UINT64_MAX;
		} else if (!strcmp(kv, "delay_us")) {
			u32 = &cfg->delay_us;
			max = 10000000; /* 10 s */
		} else if (!strcmp(kv, "reorder_max_us")) {
			u32 = &cfg->reorder_max_us;
			min = 1;
			max = 10000000;
		} else if (!strcmp(kv, "fault_slots")) {
			u32 = &cfg->queue_slots;
			min = 1;
			max = 65536;
		} else {
			if (unknown_ok)
				continue;
			return ql_error_set(
				-EINVAL,
				"soft+udp: unknown option '%s' (fault injection takes drop "
				"(loss), dup, reorder, delay, corrupt, delay_us, "
				"reorder_max_us, seed, drop_nth, drop_once, fault_slots)",
				kv);
		}
		if (parse_u64(val, &u) || u < min || u > max)
			return ql_error_set(
				-EINVAL, "soft+udp: %s=%s: expected an integer from %llu to %llu",
				kv, val, (unsigned long long)min, (unsigned long long)max);
		if (u64)
			*u64 = u;
		else
			*u32 = (uint32_t)u;
	}
	double sum = 0;
	for (int k = 0; k < ROCE_FAULT_NKINDS; k++)
		sum += cfg->rate[k];
	if (sum > 1 + 1e-9)
		return ql_error_set(-EINVAL,
				    "soft+udp: the fault rates add up to %g; each packet gets at "
				    "most one fault, so their sum must not exceed 1",
				    sum);
	return 0;
}

int ql__roce_fault_init(struct roce_fault *f, const struct roce_fault_cfg *cfg)
{
	memset(f, 0, sizeof(*f));
	if (!cfg->queue_slots || !cfg->slot_bytes)
		return ql_error_set(-EINVAL, "soft+udp: fault queue of %u slots of %u bytes",
				    cfg->queue_slots, cfg->slot_bytes);
	f->cfg = *cfg;
	f->rng = cfg->seed;
	f->slots = calloc(cfg->queue_slots, sizeof(*f->slots));
	f->mem = malloc((size_t)cfg->queue_slots * cfg->slot_bytes);
	if (!f->slots || !f->mem) {
		ql__roce_fault_fini(f);
		return ql_error_set(-ENOMEM, "soft+udp: no memory for the fault queue");
	}
	for (uint32_t i = 0; i < cfg->queue_slots; i++)
		f->slots[i].data = f->mem + (size_t)i * cfg->slot_bytes;
	return 0;
}

void ql__roce_fault_fini(struct roce_fault *f)
{
	free(f->slots);
	free(f->mem);
	f->slots = NULL;
	f->mem = NULL;
	f->used = 0;
}

/* splitmix64: one draw per packet, so a seed fixes the whole run */
static uint64_t next_rand(struct roce_fault *f)
{
	uint64_t z = (f->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* a free slot holding a copy of the packet, NULL if none or too big */
static struct roce_fault_pkt *copy_in(struct roce_fault *f, const struct iovec *iov, int n,
				      const void *peer, socklen_t peerlen)
{
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	if (f->used == f->cfg.queue_slots || len > f->cfg.slot_bytes ||
	    peerlen > sizeof(struct sockaddr_storage))
		return NULL;
	struct roce_fault_pkt *q = NULL;
	for (uint32_t i = 0; i < f->cfg.queue_slots; i++)
		if (!f->slots[i].busy) {
			q = &f->slots[i];
			break;
		}
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		memcpy(q->data + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	q->len = (uint32_t)len;
	memcpy(&q->peer, peer, peerlen);
	q->peerlen = peerlen;
	q->due_ns = 0;
	q->after_tx = 0;
	q->seq = ++f->seq;
	q->busy = true;
	f->used++;
	return q;
}

int ql__roce_fault_tx(struct roce_fault *f, uint64_t now_ns, const struct iovec *iov, int n,
		      const void *peer, socklen_t peerlen)
{
	uint64_t m = ++f->ntx;
	/* one draw per packet whatever happens, so that a packet's fate depends
	 * on the seed and its number only */
	double u = (double)(next_rand(f) >> 11) * 0x1.0p-53;
	if (m == f->cfg.drop_once || (f->cfg.drop_nth && m % f->cfg.drop_nth == 0)) {
		f->count[ROCE_FAULT_DROP]++;
		return ROCE_FAULT_CONSUMED;
	}
	int kind = -1;
	double acc = 0;
	for (int k = 0; k < ROCE_FAULT_NKINDS; k++) {
		acc += f->cfg.rate[k];
		if (u < acc) {
			kind = k;
			break;
		}
	}
	if (kind < 0)
		return ROCE_FAULT_SEND;
	if (kind == ROCE_FAULT_DROP) {
		f->count[kind]++;
		return ROCE_FAULT_CONSUMED;
	}
	struct roce_fault_pkt *q = copy_in(f, iov, n, peer, peerlen);
	if (!q) {
		f->queue_full++;
		return ROCE_FAULT_SEND;
	}
	f->count[kind]++;
	switch (kind) {
	case ROCE_FAULT_DUP:
		q->due_ns = now_ns;
		return ROCE_FAULT_SEND;
	case ROCE_FAULT_REORDER:
		q->after_tx = m;
		q->due_ns = now_ns + (uint64_t)f->cfg.reorder_max_us * 1000;
		return ROCE_FAULT_CONSUMED;
	case ROCE_FAULT_DELAY:
		q->due_ns = now_ns + (uint64_t)f->cfg.delay_us * 1000;
		return ROCE_FAULT_CONSUMED;
	default: { /* corrupt: one bit, anywhere but BTH byte 4 (not covered by the ICRC) */
		uint64_t r = next_rand(f);
		uint32_t len = q->len;
		uint32_t pos = len > 1 ? (uint32_t)((r >> 3) % (len - (len > 4))) : 0;
		if (len > 4 && pos >= 4)
			pos++;
		if (len)
			q->data[pos] ^= (uint8_t)(1u << (r & 7));
		q->due_ns = now_ns;
		return ROCE_FAULT_CONSUMED;
	}
	}
}

static bool due(const struct roce_fault *f, const struct roce_fault_pkt *q, uint64_t now_ns)
{
	return now_ns >= q->due_ns || (q->after_tx && f->ntx > q->after_tx);
}

const struct roce_fault_pkt *ql__roce_fault_next(struct roce_fault *f, uint64_t now_ns)
{
	if (!f->used)
		return NULL;
	const struct roce_fault_pkt *best = NULL;
	for (uint32_t i = 0; i < f->cfg.queue_slots; i++) {
		const struct roce_fault_pkt *q = &f->slots[i];
		if (q->busy && due(f, q, now_ns) && (!best || q->seq < best->seq)) {
			best = q;
			f->cur = i;
		}
	}
	return best;
}

void ql__roce_fault_pop(struct roce_fault *f)
{
	struct roce_fault_pkt *q = &f->slots[f->cur];
	if (q->busy) {
		q->busy = false;
		f->used--;
	}
}

uint64_t ql__roce_fault_next_due(const struct roce_fault *f)
{
	uint64_t t = UINT64_MAX;
	if (!f->used)
		return t;
	for (uint32_t i = 0; i < f->cfg.queue_slots; i++) {
		const struct roce_fault_pkt *q = &f->slots[i];
		if (q->busy && q->due_ns < t)
			t = q->due_ns;
	}
	return t;
}
