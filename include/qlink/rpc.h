/* SPDX-License-Identifier: MIT */
/*
 * rpc: the message format, schemas, marshalling and the dispatch step, as
 * one include. The parts, each usable alone:
 *
 *   qlink/rpc_wire.h    the message bytes (CUDA-Q Realtime's RPCHeader,
 *                       RPCResponse, statuses, type ids, FNV-1a): all a QCS
 *                       author needs
 *   qlink/rpc_stream.h  zero-copy bounds-checked streams; building requests
 *                       and parsing responses
 *   qlink/rpc_table.h   handlers, the function table, ql_rpc_dispatch()
 *   qlink/rpc_fn.h      typed handlers (QL_RPC_FN, QL_ARG_*, QL_RES_*)
 */
#ifndef QLINK_RPC_H
#define QLINK_RPC_H

#include "qlink/rpc_fn.h"
#include "qlink/rpc_stream.h"
#include "qlink/rpc_table.h"
#include "qlink/rpc_wire.h"

#endif
