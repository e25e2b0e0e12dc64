/* SPDX-License-Identifier: MIT */
/*
 * The dispatch step: one request message in, one response out.
 *
 * Every check happens before the handler runs, in the order of the response
 * status values, so a malformed message costs a few compares and never
 * reaches user code; a typed handler therefore always gets exactly its
 * schema's argument bytes and room for exactly its results. What the handler
 * does with its streams is checked afterwards; a frame handler's response
 * header likewise (magic, echoes, result_len within its capacity). Nothing here allocates,
 * locks, logs or enters the kernel: this runs in the dispatcher's busy loop.
 */
#include <string.h>

#include "qlink/rpc.h"
#include "rpc/dispatch_core.h"
#include "rpc/dispatch_int.h"

/* The one implementation, inlined twice: guarded (cur_name and overrun
 * given) for the daemon, plain for ql_rpc_dispatch. The checks are the
 * dispatch core's (dispatch_core.h), the GPU body's too; the frame
 * handlers' path is the CPU's own. */
static inline __attribute__((always_inline)) int32_t
dispatch(const struct ql_rpc_table *t, const uint8_t *msg, size_t msg_len, uint8_t *resp,
	 size_t resp_cap, size_t *resp_len, struct ql_rpc_dispatch_info *info,
	 const char **cur_name, bool *overrun)
{
	struct ql_rpc_header h = { 0 };
	const struct ql_rpc_table_entry *e = NULL;
	enum ql_rpc_err_kind kind;
	struct ql_rpc_response r;
	struct ql_rpc_in in;
	struct ql_rpc_out out;
	int32_t status, ret;
	uint32_t result_len = 0;
	size_t cap;
	int index = -1;

	if (__builtin_expect(!resp || resp_cap < QL_RPC_RESPONSE_SIZE, 0)) {
		if (resp_len)
			*resp_len = 0;
		if (info)
			*info = (struct ql_rpc_dispatch_info){ .status = QL_RPC_E_INTERNAL,
							       .kind = QL_RPC_ERR_INTERNAL,
							       .index = -1 };
		return QL_RPC_E_INTERNAL;
	}

	status = ql_rpc__check_header(msg, msg_len, &h, &kind);
	if (status)
		goto respond;
	index = t ? ql_rpc_table_find(t, h.function_id) : -1;
	if (index >= 0) {
		e = &t->entries[index];
		if (e->f.frame)
			goto frame;
	}
	cap = resp_cap - QL_RPC_RESPONSE_SIZE;
	status = ql_rpc__check_call(index >= 0, e && e->f.schema, e ? e->args_size : 0,
				    e ? e->results_size : 0, h.arg_len, &cap, &kind);
	if (status)
		goto respond;

	ql_rpc_in_init(&in, msg + QL_RPC_HEADER_SIZE, h.arg_len);
	ql_rpc_out_init(&out, resp + QL_RPC_RESPONSE_SIZE, cap);
	if (cur_name) {
		ql_rpc__canary_set(resp + QL_RPC_RESPONSE_SIZE + cap);
		__atomic_store_n(cur_name, e->f.name, __ATOMIC_RELAXED);
	}
	ret = e->f.fn(&in, &out, e->f.ctx);
	if (cur_name && !ql_rpc__canary_ok(resp + QL_RPC_RESPONSE_SIZE + cap)) {
		/* it wrote past its capacity: whatever it returned, its
		 * results are not to be trusted */
		*overrun = true;
		status = QL_RPC_E_INTERNAL;
		kind = QL_RPC_ERR_INTERNAL;
		goto respond;
	}
	status = ql_rpc__check_return(ret, &in, &out, e->f.schema != NULL, e->results_size,
				      &result_len, &kind);
	goto respond;

frame:
	/* The handler writes the whole frame; its capacity (header included)
	 * is what result_len can say plus the header. */
	cap = resp_cap - QL_RPC_RESPONSE_SIZE > UINT32_MAX ?
		      QL_RPC_RESPONSE_SIZE + (size_t)UINT32_MAX :
		      resp_cap;
	/* A handler that writes no header must not send a stale one. */
	memset(resp, 0, QL_RPC_RESPONSE_SIZE);
	if (cur_name) {
		ql_rpc__canary_set(resp + cap);
		__atomic_store_n(cur_name, e->f.name, __ATOMIC_RELAXED);
	}
	ret = e->f.frame(msg, QL_RPC_HEADER_SIZE + (size_t)h.arg_len, resp, cap, e->f.ctx);
	if (cur_name && !ql_rpc__canary_ok(resp + cap)) {
		*overrun = true;
		status = QL_RPC_E_INTERNAL;
		kind = QL_RPC_ERR_INTERNAL;
		goto respond;
	}
	if (ret > 0) {
		status = ret;
		kind = QL_RPC_ERR_HANDLER;
		goto respond;
	}
	ql_rpc_response_decode(resp, &r);
	if (ret < 0 || r.magic != QL_RPC_MAGIC_RESPONSE || r.request_id != h.request_id ||
	    r.ptp_timestamp != h.ptp_timestamp || r.result_len > cap - QL_RPC_RESPONSE_SIZE) {
		status = QL_RPC_E_INTERNAL;
		kind = QL_RPC_ERR_INTERNAL;
		goto respond;
	}
	/* Its own status, whatever the sign. The header is re-encoded below:
	 * the same bytes, except result_len 0 with a non-zero status. */
	status = r.status;
	if (status)
		kind = QL_RPC_ERR_HANDLER;
	else
		result_len = r.result_len;

respond:
	ql_rpc__respond(resp, status, result_len, &h);
	if (resp_len)
		*resp_len = QL_RPC_RESPONSE_SIZE + (size_t)result_len;
	if (info) {
		info->status = status;
		info->kind = kind;
		info->index = index;
		info->function_id = h.function_id;
		info->request_id = h.request_id;
		info->arg_len = h.arg_len;
		info->result_len = result_len;
	}
	return status;
}

int32_t ql_rpc_dispatch(const struct ql_rpc_table *t, const uint8_t *msg, size_t msg_len,
			uint8_t *resp, size_t resp_cap, size_t *resp_len,
			struct ql_rpc_dispatch_info *info)
{
	return dispatch(t, msg, msg_len, resp, resp_cap, resp_len, info, NULL, NULL);
}

int32_t ql__rpc_dispatch_guarded(const struct ql_rpc_table *t, const uint8_t *msg, size_t msg_len,
				 uint8_t *resp, size_t resp_cap, size_t *resp_len,
				 struct ql_rpc_dispatch_info *info, const char **cur_name,
				 bool *overrun)
{
	*overrun = false;
	return dispatch(t, msg, msg_len, resp, resp_cap, resp_len, info, cur_name, overrun);
}
