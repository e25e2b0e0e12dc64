/* SPDX-License-Identifier: MIT */
/*
 * rpc internals, private to the rpc module. What the daemon may use (the
 * guarded dispatch step) is in rpc/guarded.h.
 */
#ifndef QL_RPC_DISPATCH_INT_H
#define QL_RPC_DISPATCH_INT_H

#include "rpc/guarded.h"

#endif
