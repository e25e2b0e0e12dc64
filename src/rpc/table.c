/* SPDX-License-Identifier: MIT */
/*
 * The function table: entries by registration index, and an open-addressing
 * slot array from function_id to index that is at most half full, so that
 * ql_rpc_table_find() (inline in qlink/rpc.h) needs no allocation, no lock and
 * a probe or two. Setup only: adding is not safe against concurrent dispatch.
 */
#include "qlink/rpc.h"

#include "qlink/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define QL_RPC_TABLE_MAX 65536u

int ql_rpc_table_create(uint32_t capacity, struct ql_rpc_table **out)
{
	struct ql_rpc_table *t;
	uint32_t nslots = 2;

	*out = NULL;
	if (capacity == 0 || capacity > QL_RPC_TABLE_MAX)
		return ql_error_set(-EINVAL, "rpc table capacity %u is not in 1..%u", capacity,
				    QL_RPC_TABLE_MAX);
	while (nslots < 2 * capacity)
		nslots <<= 1;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->slots = malloc(nslots * sizeof(*t->slots));
	t->entries = calloc(capacity, sizeof(*t->entries));
	if (!t->slots || !t->entries) {
		ql_rpc_table_destroy(t);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < nslots; i++) {
		t->slots[i].id = 0;
		t->slots[i].index = -1;
	}
	t->mask = nslots - 1;
	t->capacity = capacity;
	*out = t;
	return 0;
}

void ql_rpc_table_destroy(struct ql_rpc_table *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < t->count; i++)
		free((char *)t->entries[i].f.name);
	free(t->entries);
	free(t->slots);
	free(t);
}

int ql_rpc_table_add(struct ql_rpc_table *t, const struct ql_rpc_function *f)
{
	struct ql_rpc_table_entry *e;
	uint32_t i;
	char *name;

	if (!t || !f || !f->name || !f->fn == !f->frame)
		return ql_error_set(-EINVAL,
				    "rpc function %s needs a name and exactly one handler "
				    "(fn or frame)",
				    f && f->name ? f->name : "(null)");
	if (f->frame && f->schema)
		return ql_error_set(-EINVAL,
				    "rpc function %s: a frame handler takes no schema (it reads "
				    "the frame itself)",
				    f->name);
	if (f->schema && ql_rpc_schema_check(f->schema))
		return ql_error_set(-EINVAL, "rpc function %s: invalid schema", f->name);
	if (ql_rpc_table_find(t, f->id) >= 0)
		return ql_error_set(-EEXIST, "rpc function %s: id 0x%08x already registered",
				    f->name, f->id);
	for (i = 0; i < t->count; i++)
		if (!strcmp(t->entries[i].f.name, f->name))
			return ql_error_set(-EEXIST, "rpc function %s already registered", f->name);
	if (t->count == t->capacity)
		return ql_error_set(-ENOSPC, "rpc table full (%u functions)", t->capacity);
	name = strdup(f->name);
	if (!name)
		return -ENOMEM;

	e = &t->entries[t->count];
	e->f = *f;
	e->f.name = name;
	if (f->schema) {
		e->schema = *f->schema;
		e->f.schema = &e->schema;
		e->args_size = (uint32_t)ql_rpc_schema_args_size(&e->schema);
		e->results_size = (uint32_t)ql_rpc_schema_results_size(&e->schema);
	}
	for (i = (f->id ^ (f->id >> 16)) & t->mask; t->slots[i].index >= 0; i = (i + 1) & t->mask)
		;
	t->slots[i].id = f->id;
	t->slots[i].index = (int32_t)t->count;
	return (int)t->count++;
}
