/* SPDX-License-Identifier: MIT */
/*
 * registry: the table of verbs providers, looked up by URI scheme.
 *
 * As rdma-core finds a provider by driver name, the verbs layer finds one
 * by the scheme of a device URI ("soft+shm" of soft+shm://node0) in one
 * const table (registry.c). A provider is a folder under src/ that defines
 * one `const struct ql_provider ql_provider_<name>` (open, list, memory)
 * and fills the ops tables of provider.h; it is added by one declaration
 * below and one entry in the table (docs/verbs.md, "Writing a provider").
 * The verbs layer includes no provider's header and calls no provider's
 * function by name.
 */
#ifndef QL_VERBS_REGISTRY_H
#define QL_VERBS_REGISTRY_H

#include <stddef.h>

#include "verbs/provider.h"

#define QL_PROVIDER_HIDDEN __attribute__((visibility("hidden")))

/* Called by a provider's list() once per device URI; a nonzero return
 * stops the listing and is returned by list(). */
typedef int (*ql_provider_list_cb)(void *ctx, const char *uri);

struct ql_provider {
	const char *name;	    /* "soft", "ibv": what ql_device_query reports */
	const char *const *schemes; /* URI schemes served, NULL-terminated */
	/* Non-NULL: the schemes are reserved, not served yet; the sentence
	 * says what they will be (open fails with -EPROTONOSUPPORT). A
	 * reserved entry has no functions. */
	const char *reserved;

	/* Open the device `uri`, whose scheme is `scheme` (one of schemes[])
	 * and whose part after "://" is `rest`. Fills ops and its own fields;
	 * the verbs layer fills the rest of struct ql_device. 0 or -errno with
	 * a detail set. */
	int (*open)(const char *uri, const char *scheme, const char *rest, struct ql_device **dev);
	/* Enumerate the URIs of the devices it can open here (a template such
	 * as soft+shm://NAME where any name works). 0 or the callback's
	 * nonzero return. NULL: none to list. */
	int (*list)(ql_provider_list_cb cb, void *ctx);
	/* Memory that devices of this provider can register and expose to
	 * peers, `length` bytes (a multiple of the page size, not 0), zeroed
	 * and page-aligned. pd NULL: the process-wide default memory behind
	 * ql_mem_alloc() (only the provider the registry names for it). The
	 * verbs layer validates arguments and keeps the per-PD bookkeeping;
	 * mem_free gets back exactly what mem_alloc gave (length 0 from
	 * ql_mem_free: unknown, the provider knows it). */
	int (*mem_alloc)(struct ql_pd *pd, size_t length, void **addr);
	void (*mem_free)(struct ql_pd *pd, void *addr, size_t length);
	/* What ql_pd_mem_alloc_attr's QL_MEM_GPU gives on its devices
	 * (verbs/gpu_mem.c does the CUDA part): QL_MEM_PATH_DEVICE (device
	 * memory, registered through mr_reg_dmabuf or mr_reg: a NIC that
	 * reaches GPU memory over PCIe), QL_MEM_PATH_HOST_MAPPED (mem_alloc's
	 * memory mapped into the GPU: a NIC that copies with the CPU), or
	 * QL_MEM_PATH_HOST (0): none, -EOPNOTSUPP. */
	enum ql_mem_path gpu_mem;
};

/* The providers (each defined in its own folder). */
extern const struct ql_provider ql_provider_soft QL_PROVIDER_HIDDEN;
extern const struct ql_provider ql_provider_ibv QL_PROVIDER_HIDDEN;
extern const struct ql_provider ql_provider_soft_udp QL_PROVIDER_HIDDEN;

/* The provider serving (or reserving) `scheme` of length `len` (not
 * necessarily NUL-terminated), or NULL; *matched: its schemes[] entry. */
QL_PROVIDER_HIDDEN const struct ql_provider *ql_registry_find(const char *scheme, size_t len,
							      const char **matched);
/* The i-th entry of the table (served and reserved), NULL past the end. */
QL_PROVIDER_HIDDEN const struct ql_provider *ql_registry_at(size_t i);
/* The provider whose default memory serves ql_mem_alloc(). */
QL_PROVIDER_HIDDEN const struct ql_provider *ql_registry_default_mem(void);
/* "soft, soft+shm, ibv" (served) or "soft+udp" (reserved) into buf. */
QL_PROVIDER_HIDDEN void ql_registry_schemes(char *buf, size_t len, int reserved);

#endif
