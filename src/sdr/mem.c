/* SPDX-License-Identifier: MIT */
/*
 * The SDR memory table: one root buffer of slots x slot_stride bytes,
 * registered once, and a table message id -> slot (offset, length, the
 * local root MR, the remote MR of the peer's matching slot). Set-up path:
 * a mutex guards the table; the connection's hot path does not use it
 * (it reads its own per-message state, docs/sdr.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/sdr.h"

struct ql_sdr_mem_ent {
	bool used;
	uint64_t length;
	uint64_t remote_addr;
	uint32_t remote_rkey;
	uint64_t remote_length;
};

struct ql_sdr_mem {
	pthread_mutex_t lock;
	struct ql_pd *pd;
	uint8_t *root;
	size_t root_len;
	struct ql_mr *mr;
	uint64_t stride;
	uint32_t slots;
	uint32_t nused;
	struct ql_sdr_mem_ent *ent;
	/* free ids, least recently freed first: a ring of slots entries */
	uint32_t *free_q;
	uint32_t free_head, free_count;
};

int ql_sdr_mem_create(struct ql_pd *pd, uint64_t slot_stride, uint32_t slots, int access,
		      struct ql_sdr_mem **out)
{
	struct ql_sdr_mem *m;
	int rc;

	if (!pd || !out)
		return ql_error_set(-EINVAL, "sdr mem: NULL argument");
	if (slots == 0 || slots > QL_SDR_MAX_MSG_IDS)
		return ql_error_set(-EINVAL, "sdr mem: %u slots (1..%u)", slots,
				    QL_SDR_MAX_MSG_IDS);
	if (slot_stride == 0 || slot_stride > (SIZE_MAX / 2) / slots)
		return ql_error_set(-EINVAL, "sdr mem: slot stride %llu x %u slots",
				    (unsigned long long)slot_stride, slots);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->ent = calloc(slots, sizeof(*m->ent));
	m->free_q = calloc(slots, sizeof(*m->free_q));
	if (!m->ent || !m->free_q) {
		rc = -ENOMEM;
		goto fail;
	}
	pthread_mutex_init(&m->lock, NULL);
	m->pd = pd;
	m->stride = slot_stride;
	m->slots = slots;
	m->root_len = (size_t)(slot_stride * slots);
	rc = ql_pd_mem_alloc(pd, m->root_len, (void **)&m->root);
	if (rc) {
		m->root = NULL;
		ql_error_set(rc, "sdr mem: cannot allocate the %zu-byte root buffer", m->root_len);
		goto fail;
	}
	rc = ql_mr_reg(pd, m->root, m->root_len, access, &m->mr);
	if (rc)
		goto fail;
	for (uint32_t i = 0; i < slots; i++)
		m->free_q[i] = i;
	m->free_count = slots;
	*out = m;
	return 0;
fail:
	if (m->root)
		ql_pd_mem_free(pd, m->root);
	free(m->ent);
	free(m->free_q);
	free(m);
	return rc;
}

int ql_sdr_mem_destroy(struct ql_sdr_mem *m)
{
	int rc;

	if (!m)
		return 0;
	pthread_mutex_lock(&m->lock);
	rc = m->nused ? -EBUSY : 0;
	pthread_mutex_unlock(&m->lock);
	if (rc)
		return ql_error_set(rc, "sdr mem: %u slots still allocated", m->nused);
	rc = ql_mr_dereg(m->mr);
	if (rc)
		return rc;
	ql_pd_mem_free(m->pd, m->root);
	pthread_mutex_destroy(&m->lock);
	free(m->ent);
	free(m->free_q);
	free(m);
	return 0;
}

static void fill(const struct ql_sdr_mem *m, uint32_t id, struct ql_sdr_slot *s)
{
	const struct ql_sdr_mem_ent *e = &m->ent[id];

	s->msg_id = id;
	s->offset = (uint64_t)id * m->stride;
	s->addr = m->root + s->offset;
	s->length = e->length;
	s->local_mr = m->mr;
	s->remote_addr = e->remote_addr;
	s->remote_rkey = e->remote_rkey;
	s->remote_length = e->remote_length;
}

/* Take id out of the free ring (it is there: every free id is). */
static void unqueue(struct ql_sdr_mem *m, uint32_t id)
{
	uint32_t n = m->free_count, w = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t v = m->free_q[(m->free_head + i) % m->slots];

		if (v != id)
			m->free_q[(m->free_head + w++) % m->slots] = v;
	}
	m->free_count = w;
}

static void take(struct ql_sdr_mem *m, uint32_t id, uint64_t length, struct ql_sdr_slot *s)
{
	struct ql_sdr_mem_ent *e = &m->ent[id];

	memset(e, 0, sizeof(*e));
	e->used = true;
	e->length = length;
	m->nused++;
	if (s)
		fill(m, id, s);
}

int ql_sdr_mem_alloc(struct ql_sdr_mem *m, uint32_t id, uint64_t length, struct ql_sdr_slot *s)
{
	int rc = 0;

	if (!m)
		return -EINVAL;
	if (id >= m->slots || length > m->stride)
		return ql_error_set(-ERANGE, "sdr mem: slot %u of %u, length %llu of %llu", id,
				    m->slots, (unsigned long long)length,
				    (unsigned long long)m->stride);
	pthread_mutex_lock(&m->lock);
	if (m->ent[id].used) {
		rc = -EBUSY;
	} else {
		unqueue(m, id);
		take(m, id, length, s);
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int ql_sdr_mem_alloc_any(struct ql_sdr_mem *m, uint64_t length, struct ql_sdr_slot *s)
{
	int rc = -ENOSPC;

	if (!m)
		return -EINVAL;
	if (length > m->stride)
		return ql_error_set(-ERANGE, "sdr mem: length %llu of %llu",
				    (unsigned long long)length, (unsigned long long)m->stride);
	pthread_mutex_lock(&m->lock);
	if (m->free_count) {
		uint32_t id = m->free_q[m->free_head];

		m->free_head = (m->free_head + 1) % m->slots;
		m->free_count--;
		take(m, id, length, s);
		rc = 0;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int ql_sdr_mem_free(struct ql_sdr_mem *m, uint32_t id)
{
	int rc = 0;

	if (!m || id >= m->slots)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	if (!m->ent[id].used) {
		rc = -ENOENT;
	} else {
		m->ent[id].used = false;
		m->nused--;
		m->free_q[(m->free_head + m->free_count) % m->slots] = id;
		m->free_count++;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int ql_sdr_mem_get(struct ql_sdr_mem *m, uint32_t id, struct ql_sdr_slot *s)
{
	int rc = 0;

	if (!m || !s || id >= m->slots)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	if (!m->ent[id].used)
		rc = -ENOENT;
	else
		fill(m, id, s);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int ql_sdr_mem_update_remote(struct ql_sdr_mem *m, uint32_t id, uint64_t remote_addr, uint32_t rkey,
			     uint64_t remote_length)
{
	int rc = 0;

	if (!m || id >= m->slots)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	if (!m->ent[id].used) {
		rc = -ENOENT;
	} else {
		m->ent[id].remote_addr = remote_addr;
		m->ent[id].remote_rkey = rkey;
		m->ent[id].remote_length = remote_length;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

struct ql_mr *ql_sdr_mem_root_mr(const struct ql_sdr_mem *m)
{
	return m ? m->mr : NULL;
}

uint64_t ql_sdr_mem_slot_stride(const struct ql_sdr_mem *m)
{
	return m ? m->stride : 0;
}

uint32_t ql_sdr_mem_slots(const struct ql_sdr_mem *m)
{
	return m ? m->slots : 0;
}
