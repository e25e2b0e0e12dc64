/* SPDX-License-Identifier: MIT */
/*
 * plugin: handler functions loaded from shared libraries.
 *
 * qlinkd serves the functions that plugins register. A plugin is a shared
 * library (a CMake MODULE) exporting one symbol, ql_plugin_info(), which
 * returns a description: the plugin ABI version it was built for, a name and
 * version, optional init/fini for state built from a configuration string,
 * and register_functions(), which registers its handlers through a
 * registrar. The registrar is a small table of function pointers handed in
 * by the host, so a plugin needs no symbol from qlinkd or libqlink at run
 * time: it is compiled against qlink's headers only, whose typed-handler
 * macros (QL_RPC_FN) and stream functions are header-only inlines. qlinkd
 * links libqlink statically and exports nothing. A plugin registers stream
 * handlers (typed or raw) and frame handlers (the whole request frame in,
 * the whole response frame out, as CUDA-Q's HOST_CALL handlers: see
 * ql_rpc_frame_fn in rpc_table.h; QL_RPC_FRAME_FUNCTION in rpc_fn.h)
 * through the same registrar. A typed one:
 *
 *   static int32_t decode(const uint8_t *syn, uint8_t *corr) { ... }
 *   QL_RPC_FN(decode, QL_ARG_BITS(63), QL_RES_BITS(64));
 *
 *   static int reg(void *state, const struct ql_plugin_registrar *r)
 *   {
 *           return r->register_function(r->host, &QL_RPC_FUNCTION(decode));
 *   }
 *   static const struct ql_plugin_info info = {
 *           .abi_version = QL_PLUGIN_ABI_VERSION, .name = "decoder",
 *           .version = "1.0", .register_functions = reg,
 *   };
 *   QL_PLUGIN_EXPORT const struct ql_plugin_info *ql_plugin_info(void)
 *   {
 *           return &info;
 *   }
 *
 * Loading checks the ABI version before calling anything else in the
 * plugin, so a plugin built against another qlink is refused with a clear
 * error instead of misbehaving. Handlers run on dispatcher threads, one per
 * session, possibly concurrently: state shared through ctx must be
 * read-only or thread-safe.
 *
 * This header is the plugin ABI only (what a plugin compiles against); the
 * loader that qlinkd uses is qlinkd-private (src/plugin/loader.h).
 */
#ifndef QLINK_PLUGIN_H
#define QLINK_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "qlink/log.h"
#include "qlink/rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Bumped whenever anything a plugin sees changes incompatibly: struct
 * ql_plugin_info, struct ql_plugin_registrar, struct ql_rpc_function,
 * struct ql_rpc_schema, the stream structs and the handler signatures.
 * 1: stream handlers only. 2: struct ql_rpc_function gained `frame` (frame
 * handlers, CUDA-Q's HOST_CALL form); a version 1 plugin is refused.
 * 3: struct ql_plugin_info gained `flags` and struct ql_plugin_registrar
 * `request_source` (both appended); a version 2 plugin still loads, read
 * as flags 0 (state per session: not served on shared listeners).
 */
#define QL_PLUGIN_ABI_VERSION 3u
/* The oldest plugin ABI this host loads. */
#define QL_PLUGIN_ABI_MIN 2u

/*
 * What a plugin's state is, for listeners shared by every sender (qlinkd's
 * `udp:` listeners, where any allowed source, spoofed ones too, reaches the
 * same session). flags 0 (and every version 2 plugin): the plugin keeps
 * state per session (register_functions is called once per session and
 * its handlers share what it made), which on a shared listener one caller
 * could change or read for another: qlinkd refuses to start with such a
 * plugin and a `udp:` listener (a config error naming both).
 */
#define QL_PLUGIN_STATELESS \
	0x1u /* handlers keep nothing between requests that
				     another caller could change or read */
#define QL_PLUGIN_PER_SOURCE \
	0x2u /* state kept per request source, found with
				     registrar->request_source */

/* The symbol a plugin exports. */
#define QL_PLUGIN_SYMBOL "ql_plugin_info"
#define QL_PLUGIN_EXPORT __attribute__((visibility("default")))

/* What the host hands a plugin to register its functions with. */
struct ql_plugin_registrar {
	uint32_t abi_version; /* QL_PLUGIN_ABI_VERSION of the host */
	void *host;	      /* pass back as the first argument */
	/* Register one function (typed, raw or frame, see rpc_table.h;
	 * copied, so a compound literal is fine; ctx and the handler must live
	 * until fini). 0 or a negative errno: -EEXIST for a name or id already
	 * registered, -EINVAL for neither or both of fn and frame. */
	int (*register_function)(void *host, const struct ql_rpc_function *fn);
	/* Log a line through the host's logger, attributed to the plugin. */
	void (*log)(void *host, enum ql_log_level level, const char *msg);
	/* Version 3. Called from a handler: the key of the source of the
	 * request it is serving into key[0..cap) (a UDP listener: IPv4 address
	 * and port, 6 bytes, or IPv6 address and port, 18 bytes, network
	 * order); its length, or 0 when the session has one peer (ring, hsb
	 * sessions) or outside a handler. Keep the function pointer (the
	 * registrar itself lives only during register_functions); host may be
	 * NULL. No allocation, lock or system call. */
	size_t (*request_source)(void *host, uint8_t *key, size_t cap);
};

/* The longest key request_source gives. */
#define QL_PLUGIN_SOURCE_MAX 18u

struct ql_plugin_info {
	uint32_t abi_version; /* QL_PLUGIN_ABI_VERSION it was built with */
	const char *name;     /* short, for logs */
	const char *version;
	/* Optional: build state from the config string (NULL when the config
	 * file gives none). 0 or a negative errno. */
	int (*init)(const char *config, void **state);
	/* Optional: free what init built. */
	void (*fini)(void *state);
	/* Register every function; called once per daemon (session). */
	int (*register_functions)(void *state, const struct ql_plugin_registrar *reg);
	/* Version 3: QL_PLUGIN_STATELESS, QL_PLUGIN_PER_SOURCE (0: state per
	 * session, the safe reading of a version 2 plugin). */
	uint32_t flags;
};

typedef const struct ql_plugin_info *(*ql_plugin_info_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
