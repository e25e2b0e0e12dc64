/* SPDX-License-Identifier: MIT */
/*
 * The dispatch step as the daemon runs it: the same checks as
 * ql_rpc_dispatch, plus what a dispatcher needs to contain a handler it
 * cannot trust. The rpc module's in-tree interface for the daemon (not
 * public: libqlink.so does not export it).
 */
#ifndef QL_RPC_GUARDED_H
#define QL_RPC_GUARDED_H

#include <stdbool.h>

#include "qlink/rpc.h"
#include "rpc/dispatch_core.h"

/* Bytes the caller leaves writable past resp_cap for the canary. */
#define QL__RPC_CANARY_SIZE QL_RPC__CANARY_BYTES

/*
 * ql_rpc_dispatch, and besides:
 * - just before the handler runs, its name is stored (relaxed) in *cur_name,
 *   so a watchdog or a crash report can say which function is running;
 * - a canary is written right past the handler's output capacity (for a
 *   typed function past its declared results, for a raw or frame one at
 *   resp_cap)
 *   and checked when it returns: a handler that wrote over it gets status
 *   QL_RPC_E_INTERNAL (kind QL_RPC_ERR_INTERNAL) and *overrun is set.
 * resp must have QL__RPC_CANARY_SIZE writable bytes after resp_cap.
 */
int32_t ql__rpc_dispatch_guarded(const struct ql_rpc_table *t, const uint8_t *msg, size_t msg_len,
				 uint8_t *resp, size_t resp_cap, size_t *resp_len,
				 struct ql_rpc_dispatch_info *info, const char **cur_name,
				 bool *overrun);

#endif
