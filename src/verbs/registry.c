/* SPDX-License-Identifier: MIT */
/*
 * The provider table: which provider serves which URI scheme. Adding a
 * provider is its folder plus one entry here (and its declaration in
 * registry.h); a scheme announced before its provider exists is a reserved
 * entry, which ql_device_open refuses with a sentence saying what it will be.
 */
#include <stdio.h>
#include <string.h>

#include "verbs/registry.h"

/* Lookup and listing order. */
static const struct ql_provider *const providers[] = {
	&ql_provider_soft,
	&ql_provider_ibv,
	&ql_provider_soft_udp,
};

#define NPROVIDERS (sizeof(providers) / sizeof(providers[0]))

const struct ql_provider *ql_registry_find(const char *scheme, size_t len, const char **matched)
{
	for (size_t i = 0; i < NPROVIDERS; i++) {
		for (const char *const *s = providers[i]->schemes; *s; s++) {
			if (strlen(*s) == len && !strncmp(*s, scheme, len)) {
				*matched = *s;
				return providers[i];
			}
		}
	}
	return NULL;
}

const struct ql_provider *ql_registry_at(size_t i)
{
	return i < NPROVIDERS ? providers[i] : NULL;
}

const struct ql_provider *ql_registry_default_mem(void)
{
	/* ql_mem_alloc() predates scoped memory: it has always been the soft
	 * provider's shared heap, which every provider can register. */
	return &ql_provider_soft;
}

void ql_registry_schemes(char *buf, size_t len, int reserved)
{
	size_t off = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < NPROVIDERS; i++) {
		if (!providers[i]->reserved != !reserved)
			continue;
		for (const char *const *s = providers[i]->schemes; *s && off < len; s++) {
			int n = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", *s);

			if (n < 0)
				return;
			off += (size_t)n;
		}
	}
}
