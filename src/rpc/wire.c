/* SPDX-License-Identifier: MIT */
/* Type descriptors, schema validation and status names (see qlink/rpc.h). */
#include "qlink/rpc.h"

#include <errno.h>
#include <stdint.h>

const char *ql_rpc_status_str(int32_t status)
{
	if (status > 0)
		return "handler error";
	switch (status) {
	case QL_RPC_STATUS_OK:
		return "success";
	case QL_RPC_E_BAD_MAGIC:
		return "bad magic";
	case QL_RPC_E_SHORT:
		return "message shorter than header";
	case QL_RPC_E_BAD_LENGTH:
		return "arg_len past end of message";
	case QL_RPC_E_UNKNOWN_FUNCTION:
		return "unknown function";
	case QL_RPC_E_ARGS_MISMATCH:
		return "arguments do not match schema";
	case QL_RPC_E_RESULT_OVERFLOW:
		return "results do not fit response";
	case QL_RPC_E_INTERNAL:
		return "internal error";
	default:
		return "protocol error";
	}
}

const char *ql_rpc_err_kind_str(enum ql_rpc_err_kind kind)
{
	static const char *const names[QL_RPC_ERR_KIND_COUNT] = {
		[QL_RPC_ERR_NONE] = "none",
		[QL_RPC_ERR_SHORT] = "short",
		[QL_RPC_ERR_BAD_MAGIC] = "bad_magic",
		[QL_RPC_ERR_BAD_LENGTH] = "bad_length",
		[QL_RPC_ERR_UNKNOWN_FUNCTION] = "unknown_function",
		[QL_RPC_ERR_ARGS_MISMATCH] = "args_mismatch",
		[QL_RPC_ERR_HANDLER] = "handler_error",
		[QL_RPC_ERR_RESULT_OVERFLOW] = "result_overflow",
		[QL_RPC_ERR_INTERNAL] = "internal",
	};

	if ((unsigned int)kind >= QL_RPC_ERR_KIND_COUNT)
		return "unknown";
	return names[kind];
}

int ql_rpc_type_elem_size(uint8_t type_id)
{
	switch (type_id) {
	case QL_RPC_TYPE_UINT8:
	case QL_RPC_TYPE_ARRAY_UINT8:
		return 1;
	case QL_RPC_TYPE_INT32:
	case QL_RPC_TYPE_FLOAT32:
	case QL_RPC_TYPE_ARRAY_INT32:
	case QL_RPC_TYPE_ARRAY_FLOAT32:
		return 4;
	case QL_RPC_TYPE_INT64:
	case QL_RPC_TYPE_FLOAT64:
	case QL_RPC_TYPE_ARRAY_FLOAT64:
		return 8;
	case QL_RPC_TYPE_BIT_PACKED:
		return 0;
	default:
		return -EINVAL;
	}
}

static int is_scalar(uint8_t type_id)
{
	return type_id >= QL_RPC_TYPE_UINT8 && type_id <= QL_RPC_TYPE_FLOAT64;
}

/* The size_bytes that type_id with n elements must have, or -1. */
static int64_t expected_size(uint8_t type_id, uint32_t n)
{
	int es = ql_rpc_type_elem_size(type_id);

	if (es < 0)
		return -1;
	if (is_scalar(type_id))
		return n == 1 ? es : -1;
	if (n == 0)
		return -1; /* an empty array carries nothing and has no C type */
	if (type_id == QL_RPC_TYPE_BIT_PACKED)
		return (int64_t)ql_rpc_bits_size(n);
	return (int64_t)n * es; /* at most 2^35, no overflow */
}

int ql_rpc_type_init(struct ql_rpc_type *t, uint8_t type_id, uint32_t n)
{
	int64_t size = expected_size(type_id, n);

	if (size < 0 || size > UINT32_MAX)
		return -EINVAL;
	t->type_id = type_id;
	t->reserved[0] = t->reserved[1] = t->reserved[2] = 0;
	t->size_bytes = (uint32_t)size;
	t->num_elements = n;
	return 0;
}

int ql_rpc_type_check(const struct ql_rpc_type *t)
{
	int64_t size = expected_size(t->type_id, t->num_elements);

	if (size < 0 || size != t->size_bytes)
		return -EINVAL;
	if (t->reserved[0] || t->reserved[1] || t->reserved[2])
		return -EINVAL;
	return 0;
}

static int check_side(const struct ql_rpc_type *v, unsigned int n)
{
	uint64_t total = 0;

	for (unsigned int i = 0; i < n; i++) {
		if (ql_rpc_type_check(&v[i]))
			return -EINVAL;
		total += v[i].size_bytes;
	}
	return total > UINT32_MAX ? -EINVAL : 0;
}

int ql_rpc_schema_check(const struct ql_rpc_schema *s)
{
	if (!s || s->nargs > QL_RPC_MAX_ARGS || s->nresults > QL_RPC_MAX_RESULTS)
		return -EINVAL;
	if (check_side(s->args, s->nargs) || check_side(s->results, s->nresults))
		return -EINVAL;
	return 0;
}

static size_t side_size(const struct ql_rpc_type *v, unsigned int n, unsigned int max)
{
	size_t total = 0;

	if (n > max)
		n = max;
	for (unsigned int i = 0; i < n; i++)
		total += v[i].size_bytes;
	return total;
}

size_t ql_rpc_schema_args_size(const struct ql_rpc_schema *s)
{
	return side_size(s->args, s->nargs, QL_RPC_MAX_ARGS);
}

size_t ql_rpc_schema_results_size(const struct ql_rpc_schema *s)
{
	return side_size(s->results, s->nresults, QL_RPC_MAX_RESULTS);
}
