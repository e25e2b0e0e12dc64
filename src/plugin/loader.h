/* SPDX-License-Identifier: MIT */
/*
 * plugin loader (qlinkd-private, not installed): dlopen a handler plugin,
 * check its ABI and description (include/qlink/plugin.h) and register its
 * functions on a daemon or a table. Lives outside the public library so
 * that a program using only verbs/rpc does not link libdl.
 */
#ifndef QLINK_PLUGIN_LOADER_H
#define QLINK_PLUGIN_LOADER_H

#include <stdint.h>

#include "qlink/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ql_plugin;
struct ql_daemon;
struct ql_rpc_table;

/*
 * Whether path may be loaded, without loading it (no code of it runs): it
 * exists, is a regular file, and it and every directory above it (after
 * symbolic links are resolved) are owned by root or the effective uid and
 * not group- or world-writable (a sticky /tmp-like directory included).
 * 0, or a negative errno with a detail sentence naming the plugin, the
 * offending file or directory and why: -ENOENT no such file, -EPERM an
 * untrusted owner or mode, -ENOEXEC not a regular file, -ENOTDIR, -ELOOP.
 */
int ql_plugin_check(const char *path);
/*
 * ql_plugin_check(path), then dlopen the checked file (RTLD_NOW |
 * RTLD_LOCAL), find ql_plugin_info, check the ABI version and the
 * description, and call init(config). 0 and *plugin, or a negative errno
 * with a detail sentence naming the file and the cause: those of
 * ql_plugin_check, -ENOEXEC not a loadable library or unresolved symbols,
 * -ENOSYS no ql_plugin_info symbol, -EPROTO an ABI version mismatch,
 * -EINVAL a malformed description, or init's own error.
 */
int ql_plugin_load(const char *path, const char *config, struct ql_plugin **plugin);
/* fini, then dlclose. Every daemon it registered functions on must be
 * destroyed first: their tables point at the plugin's code. */
void ql_plugin_unload(struct ql_plugin *plugin);

const struct ql_plugin_info *ql_plugin_get_info(const struct ql_plugin *plugin);
const char *ql_plugin_path(const struct ql_plugin *plugin);
/* Its QL_PLUGIN_* flags (0 for a version 2 plugin: state per session). */
uint32_t ql_plugin_flags(const struct ql_plugin *plugin);
/* Functions registered by the last ql_plugin_register* call. */
uint32_t ql_plugin_function_count(const struct ql_plugin *plugin);

/* Register the plugin's functions on a (stopped) daemon / a table. */
int ql_plugin_register(struct ql_plugin *plugin, struct ql_daemon *daemon);
int ql_plugin_register_table(struct ql_plugin *plugin, struct ql_rpc_table *table);
/* With a caller-made registrar (abi_version is filled in). */
int ql_plugin_register_with(struct ql_plugin *plugin, struct ql_plugin_registrar *reg);

#ifdef __cplusplus
}
#endif
#endif
