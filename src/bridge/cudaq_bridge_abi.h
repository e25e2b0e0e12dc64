/* SPDX-License-Identifier: MIT */
/*
 * The CUDA-Q Realtime bridge-provider ABI, version 3, as CUDA-Q documents it
 * (docs/cudaq-bridge.md, "The ABI"), declared here from that description so
 * that qlink needs none of CUDA-Q's headers (nor CUDA) to build a provider.
 *
 * CUDA-Q dlopen()s a provider library, calls its one exported function
 * cudaq_realtime_get_bridge_interface() and drives the transport through the
 * function table it returns. Every layout below is pinned by _Static_assert
 * to the documented LP64 sizes and offsets: a mismatch is a build error, not
 * a crash inside CUDA-Q. Private to src/bridge and its test; never installed.
 */
#ifndef QL_BRIDGE_CUDAQ_BRIDGE_ABI_H
#define QL_BRIDGE_CUDAQ_BRIDGE_ABI_H

#include <stddef.h>
#include <stdint.h>

#define QL_CUDAQ_BRIDGE_VERSION 3
#define QL_CUDAQ_BRIDGE_ENTRY "cudaq_realtime_get_bridge_interface"

/* Status values every interface function returns (an int-sized enum). */
typedef enum {
	QL_CUDAQ_OK = 0,
	QL_CUDAQ_ERR_INVALID_ARG = 1,
	QL_CUDAQ_ERR_INTERNAL = 2,
	QL_CUDAQ_ERR_CUDA = 3,
	QL_CUDAQ_ERR_UNSUPPORTED = 4,
} ql_cudaq_status_t;

/* What get_transport_context is asked for. */
typedef enum {
	QL_CUDAQ_CTX_RING_BUFFER = 0, /* out: ql_cudaq_ringbuffer_t */
	QL_CUDAQ_CTX_UNIFIED = 1,     /* out: ql_cudaq_unified_ctx_t */
} ql_cudaq_context_kind_t;

/* rx_poll's answer. */
typedef enum {
	QL_CUDAQ_RX_READY = 0,
	QL_CUDAQ_RX_EMPTY = 1,
} ql_cudaq_rx_status_t;

/* Dispatch modes of a function-table entry. */
enum {
	QL_CUDAQ_DISPATCH_DEVICE_CALL = 0,
	QL_CUDAQ_DISPATCH_GRAPH_LAUNCH = 1,
	QL_CUDAQ_DISPATCH_HOST_CALL = 2,
};

/* tx_flags values besides 0 (empty) and a TX slot's address (reply ready). */
#define QL_CUDAQ_TX_IN_FLIGHT 0xEEEEEEEEEEEEEEEEull /* a graph runs for the slot */
#define QL_CUDAQ_TX_ERR_TAG 0xDEADull		    /* bits 63..48: graph launch failed */
#define QL_CUDAQ_TX_IS_ERROR(v) (((uint64_t)(v) >> 48) == QL_CUDAQ_TX_ERR_TAG)

typedef void *ql_cudaq_bridge_handle_t;

/* The ring: two data arrays of N slots (slot i at base + i x stride) and two
 * arrays of N 64-bit flags, plus the host views of the same four arrays (a
 * CPU provider gives the same addresses twice). */
typedef struct {
	volatile uint64_t *rx_flags;
	volatile uint64_t *tx_flags;
	uint8_t *rx_data;
	uint8_t *tx_data;
	size_t rx_stride_sz;
	size_t tx_stride_sz;
	volatile uint64_t *rx_flags_host;
	volatile uint64_t *tx_flags_host;
	uint8_t *rx_data_host;
	uint8_t *tx_data_host;
} ql_cudaq_ringbuffer_t;

typedef ql_cudaq_rx_status_t (*ql_cudaq_rx_poll_fn)(void *ctx, uint32_t *out_slot);
typedef ql_cudaq_status_t (*ql_cudaq_tx_publish_fn)(void *ctx, uint32_t slot);

/* The unified shape's data plane: the dispatcher's one thread calls rx_poll
 * (never blocks) and tx_publish (sends TX slot `slot`) with ctx. */
typedef struct {
	void *ctx;
	ql_cudaq_ringbuffer_t ring;
	ql_cudaq_rx_poll_fn rx_poll;
	ql_cudaq_tx_publish_fn tx_publish;
} ql_cudaq_cpu_dataplane_t;

/* get_transport_context(UNIFIED): a GPU provider's launch function and its
 * state; a CPU provider leaves both NULL (the dispatcher's loop drives it). */
typedef struct {
	void *launch_fn;
	void *transport_ctx;
} ql_cudaq_unified_ctx_t;

/* HOST_CALL handlers: read the request slot, write the whole reply. */
typedef void (*ql_cudaq_host_fn)(const void *rx_slot, void *tx_slot, size_t slot_size);

typedef struct {
	uint8_t type_id;
	uint8_t reserved[3];
	uint32_t size_bytes;
	uint32_t num_elements;
} ql_cudaq_type_desc_t;

typedef struct {
	uint8_t num_args;
	uint8_t num_results;
	uint16_t reserved;
	ql_cudaq_type_desc_t args[8];
	ql_cudaq_type_desc_t results[4];
} ql_cudaq_schema_t;

typedef struct {
	union {
		void *device_fn;
		void *graph_exec;
		ql_cudaq_host_fn host_fn;
	} handler;
	uint32_t function_id;
	uint8_t dispatch_mode;
	uint8_t reserved[3];
	ql_cudaq_schema_t schema;
	uint64_t routing_key;
} ql_cudaq_function_entry_t;

typedef struct {
	ql_cudaq_function_entry_t *entries;
	uint32_t count;
} ql_cudaq_function_table_t;

/* The interface, fields in this order; 8..10 read from version >= 2, 11
 * from version >= 3; a NULL optional field reads as UNSUPPORTED. */
typedef struct {
	int version;
	ql_cudaq_status_t (*create)(ql_cudaq_bridge_handle_t *out, int argc, char **argv);
	ql_cudaq_status_t (*destroy)(ql_cudaq_bridge_handle_t h);
	ql_cudaq_status_t (*get_transport_context)(ql_cudaq_bridge_handle_t h,
						   ql_cudaq_context_kind_t kind, void *out);
	ql_cudaq_status_t (*connect)(ql_cudaq_bridge_handle_t h);
	ql_cudaq_status_t (*launch)(ql_cudaq_bridge_handle_t h);
	ql_cudaq_status_t (*disconnect)(ql_cudaq_bridge_handle_t h);
	ql_cudaq_status_t (*get_cpu_dataplane)(ql_cudaq_bridge_handle_t h,
					       ql_cudaq_cpu_dataplane_t *out);
	ql_cudaq_status_t (*get_endpoint_info)(ql_cudaq_bridge_handle_t h, char *buf, size_t len);
	ql_cudaq_status_t (*get_ring_geometry)(ql_cudaq_bridge_handle_t h, uint32_t *num_slots,
					       uint32_t *slot_size);
	ql_cudaq_status_t (*set_function_table)(ql_cudaq_bridge_handle_t h,
						const ql_cudaq_function_table_t *table);
} ql_cudaq_bridge_interface_t;

typedef ql_cudaq_bridge_interface_t *(*ql_cudaq_get_bridge_interface_fn)(void);

/* ---- the documented LP64 layout ------------------------------------------ */

_Static_assert(sizeof(void *) == 8 && sizeof(size_t) == 8, "the ABI is LP64");
_Static_assert(sizeof(ql_cudaq_status_t) == 4, "status is an int");
_Static_assert(sizeof(ql_cudaq_context_kind_t) == 4, "context kind is an int");
_Static_assert(sizeof(ql_cudaq_rx_status_t) == 4, "poll result is an int");

_Static_assert(sizeof(ql_cudaq_ringbuffer_t) == 80, "cudaq_ringbuffer_t is 80 bytes");
_Static_assert(offsetof(ql_cudaq_ringbuffer_t, rx_flags) == 0, "rx_flags");
_Static_assert(offsetof(ql_cudaq_ringbuffer_t, tx_flags) == 8, "tx_flags");
_Static_assert(offsetof(ql_cudaq_ringbuffer_t, rx_data) == 16, "rx_data");
_Static_assert(offsetof(ql_cudaq_ringbuffer_t, tx_data) == 24, "tx_data");
_Static_assert(offsetof(ql_cudaq_ringbuffer_t, rx_stride_sz) == 32, "rx_stride_sz");
_Static_assert(offsetof(ql_cudaq_ringbuffer_t, tx_stride_sz) == 40, "tx_stride_sz");
_Static_assert(offsetof(ql_cudaq_ringbuffer_t, rx_flags_host) == 48, "rx_flags_host");
_Static_assert(offsetof(ql_cudaq_ringbuffer_t, tx_flags_host) == 56, "tx_flags_host");
_Static_assert(offsetof(ql_cudaq_ringbuffer_t, rx_data_host) == 64, "rx_data_host");
_Static_assert(offsetof(ql_cudaq_ringbuffer_t, tx_data_host) == 72, "tx_data_host");

_Static_assert(sizeof(ql_cudaq_cpu_dataplane_t) == 104, "cudaq_cpu_dataplane_t");
_Static_assert(offsetof(ql_cudaq_cpu_dataplane_t, ctx) == 0, "dataplane ctx");
_Static_assert(offsetof(ql_cudaq_cpu_dataplane_t, ring) == 8, "dataplane ring");
_Static_assert(offsetof(ql_cudaq_cpu_dataplane_t, rx_poll) == 88, "dataplane rx_poll");
_Static_assert(offsetof(ql_cudaq_cpu_dataplane_t, tx_publish) == 96, "dataplane tx_publish");

_Static_assert(sizeof(ql_cudaq_unified_ctx_t) == 16, "cudaq_unified_dispatch_ctx_t");

_Static_assert(sizeof(ql_cudaq_type_desc_t) == 12, "type descriptor");
_Static_assert(offsetof(ql_cudaq_type_desc_t, size_bytes) == 4, "size_bytes");
_Static_assert(offsetof(ql_cudaq_type_desc_t, num_elements) == 8, "num_elements");
_Static_assert(sizeof(ql_cudaq_schema_t) == 148, "handler schema");
_Static_assert(offsetof(ql_cudaq_schema_t, args) == 4, "schema args");
_Static_assert(offsetof(ql_cudaq_schema_t, results) == 100, "schema results");
_Static_assert(sizeof(ql_cudaq_function_entry_t) == 176, "function entry");
/* sizeof(cudaq_function_entry_t) now, and in CUDA-Q headers from before
 * routing_key (the same fields up to offset 168, nothing after): the
 * provider reads a caller's table at the size the caller declares. */
#define QL_CUDAQ_ENTRY_SIZE 176u
#define QL_CUDAQ_ENTRY_SIZE_V3_0 168u
_Static_assert(offsetof(ql_cudaq_function_entry_t, function_id) == 8, "function_id");
_Static_assert(offsetof(ql_cudaq_function_entry_t, dispatch_mode) == 12, "dispatch_mode");
_Static_assert(offsetof(ql_cudaq_function_entry_t, schema) == 16, "schema");
_Static_assert(offsetof(ql_cudaq_function_entry_t, routing_key) == 168, "routing_key");
_Static_assert(sizeof(ql_cudaq_function_table_t) == 16, "function table");
_Static_assert(offsetof(ql_cudaq_function_table_t, count) == 8, "table count");

_Static_assert(sizeof(ql_cudaq_bridge_interface_t) == 88, "interface: 11 fields");
_Static_assert(offsetof(ql_cudaq_bridge_interface_t, create) == 8, "create");
_Static_assert(offsetof(ql_cudaq_bridge_interface_t, destroy) == 16, "destroy");
_Static_assert(offsetof(ql_cudaq_bridge_interface_t, get_transport_context) == 24, "context");
_Static_assert(offsetof(ql_cudaq_bridge_interface_t, connect) == 32, "connect");
_Static_assert(offsetof(ql_cudaq_bridge_interface_t, launch) == 40, "launch");
_Static_assert(offsetof(ql_cudaq_bridge_interface_t, disconnect) == 48, "disconnect");
_Static_assert(offsetof(ql_cudaq_bridge_interface_t, get_cpu_dataplane) == 56, "dataplane");
_Static_assert(offsetof(ql_cudaq_bridge_interface_t, get_endpoint_info) == 64, "endpoint");
_Static_assert(offsetof(ql_cudaq_bridge_interface_t, get_ring_geometry) == 72, "geometry");
_Static_assert(offsetof(ql_cudaq_bridge_interface_t, set_function_table) == 80, "table");

/* qlink's extension, not CUDA-Q's (docs/cudaq-bridge.md "Progress"): with
 * --progress=caller the ring shape has no pump thread, and a program that
 * runs its own dispatcher loop calls this (dlsym) from that loop's thread
 * while the ring is empty: one bounded turn of the pump (frames received
 * and flagged, retired slots answered). > 0 when anything moved; 0 in any
 * other mode or shape, before launch and after disconnect. */
#define QL_CUDAQ_BRIDGE_PROGRESS "qlink_cudaq_bridge_progress"
typedef int (*ql_cudaq_bridge_progress_fn)(ql_cudaq_bridge_handle_t h);
int qlink_cudaq_bridge_progress(ql_cudaq_bridge_handle_t h);

#endif
