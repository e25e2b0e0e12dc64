/* SPDX-License-Identifier: MIT */
/*
 * plugin_host_call: a qlinkd plugin serving a handler written in CUDA-Q
 * Realtime's HOST_CALL form, next to an ordinary stream handler.
 *
 * `reverse_bytes` is a frame handler: it gets the whole request frame
 * (24-byte header + arguments) and writes the whole response frame, header
 * included, as a CUDA-Q HOST_CALL handler does with its request and reply
 * slots. Here it is written exactly in that form, reverse_host_call(rx_slot,
 * tx_slot, slot_size), and registered through a three-line adapter, which is
 * how an existing CUDA-Q handler moves to qlink unchanged. qlinkd checks the
 * frame it writes (magic, request_id and ptp_timestamp copied, result_len
 * within the capacity, nothing written past it) and answers
 * QL_RPC_E_INTERNAL instead of a broken one.
 *
 * `byte_sum` is a raw stream handler (its arguments from a stream, its
 * results to one): both kinds register through the same registrar.
 *
 * Build as a MODULE (see examples/CMakeLists.txt) and list it under
 * `plugins:` in qlinkd's config. Like every plugin it uses only qlink's
 * headers and links against nothing of qlink's.
 */
#include <stddef.h>
#include <stdint.h>

#include <qlink/plugin.h>

/* A handler in CUDA-Q's HOST_CALL form: reply = the argument bytes in
 * reverse order. It reads the request header, bounds its work by the
 * slot, and writes the response header itself. */
static void reverse_host_call(const void *rx_slot, void *tx_slot, size_t slot_size)
{
	const uint8_t *rx = rx_slot;
	uint8_t *tx = tx_slot;
	struct ql_rpc_header h;
	struct ql_rpc_response r;
	size_t room = slot_size - QL_RPC_RESPONSE_SIZE;

	ql_rpc_header_decode(rx, &h);
	if (h.arg_len > room) {
		r = (struct ql_rpc_response){ QL_RPC_MAGIC_RESPONSE, 1, 0, h.request_id,
					      h.ptp_timestamp };
	} else {
		for (uint32_t i = 0; i < h.arg_len; i++)
			tx[QL_RPC_RESPONSE_SIZE + i] = rx[QL_RPC_HEADER_SIZE + h.arg_len - 1 - i];
		r = (struct ql_rpc_response){ QL_RPC_MAGIC_RESPONSE, 0, h.arg_len, h.request_id,
					      h.ptp_timestamp };
	}
	ql_rpc_response_encode(tx, &r);
}

/* The adapter: qlink's frame handler calls the CUDA-Q-form one. req holds
 * exactly the frame (header + arg_len bytes), so a handler that trusts the
 * header's arg_len, as CUDA-Q's do, reads nothing beyond it. */
static int32_t reverse_bytes(const uint8_t *req, size_t req_len, uint8_t *resp, size_t resp_cap,
			     void *ctx)
{
	(void)req_len;
	(void)ctx;
	reverse_host_call(req, resp, resp_cap);
	return 0;
}

/* A raw stream handler: the sum of the argument bytes, as a u32. */
static int32_t byte_sum(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	size_t n = ql_rpc_in_left(in);
	const uint8_t *p = ql_rpc_in_view(in, n);
	uint32_t sum = 0;

	(void)ctx;
	for (size_t i = 0; p && i < n; i++)
		sum += p[i];
	ql_rpc_write_u32(out, sum);
	return 0;
}

static int host_call_register(void *state, const struct ql_plugin_registrar *reg)
{
	int ret;

	(void)state;
	ret = reg->register_function(reg->host,
				     &QL_RPC_FRAME_FUNCTION("reverse_bytes", reverse_bytes, NULL));
	if (!ret)
		ret = reg->register_function(reg->host,
					     &QL_RPC_RAW_FUNCTION("byte_sum", byte_sum, NULL));
	return ret;
}

static const struct ql_plugin_info info = {
	.abi_version = QL_PLUGIN_ABI_VERSION,
	.name = "host_call",
	.version = "1.0",
	.register_functions = host_call_register,
	.flags = QL_PLUGIN_STATELESS, /* keeps nothing between requests */
};

QL_PLUGIN_EXPORT const struct ql_plugin_info *ql_plugin_info(void);

const struct ql_plugin_info *ql_plugin_info(void)
{
	return &info;
}
