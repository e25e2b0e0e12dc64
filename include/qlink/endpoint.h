/* SPDX-License-Identifier: MIT */
/*
 * endpoint: an RDMA endpoint service (seed 002). A versioned YAML file names
 * endpoints, each a path, an operation type (send, receive, write, read: the
 * client's operation) and a buffer size. A server registers one buffer per
 * endpoint, accepts many clients, runs the endpoint's handler at the seed's
 * moments (send/write: after the data landed; receive/read: before the data
 * leaves) and keeps serving whatever a client does. A client connects, then
 * calls ql_ep_send/recv/write/read(path, buffer); the descriptor of a
 * write/read endpoint (address, rkey, size) is fetched once per connection,
 * so a repeated write or read is one RDMA operation plus an acknowledgement.
 *
 * Connections are set up through a small connection manager of the module's
 * own (a TCP or UNIX stream socket exchanging ql_conn_params text), whose
 * socket lives as long as the connection: a client that dies is noticed by
 * the server through it. Everything else travels over the verbs API, so the
 * service runs on every provider. Wire format, YAML format and the timing
 * rules: docs/endpoint.md.
 *
 * Threading: a server is driven by one thread (ql_ep_server_poll/run);
 * a client by one thread at a time. Distinct clients are independent.
 */
#ifndef QLINK_ENDPOINT_H
#define QLINK_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The client's operation on an endpoint (the seed's "type"). */
enum ql_ep_type {
	QL_EP_SEND = 1,	   /* client SENDs into the endpoint's buffer */
	QL_EP_RECEIVE = 2, /* client receives what the server SENDs from it */
	QL_EP_WRITE = 3,   /* client RDMA-WRITEs into the endpoint's buffer */
	QL_EP_READ = 4,	   /* client RDMA-READs the endpoint's buffer */
};

#define QL_EP_PATH_MAX 128	      /* a path is 1..127 bytes */
#define QL_EP_SIZE_MAX (256ull << 20) /* a buffer is 1 byte .. 256 MiB */
#define QL_EP_MAX_ENDPOINTS 256
#define QL_EP_SPEC_VERSION 1 /* the YAML file's `version:` */
#define QL_EP_DEFAULT_PORT 7471
#define QL_EP_DEFAULT_MAX_CONNS 64
#define QL_EP_DEFAULT_MAX_PER_SOURCE 16

/* "send", "receive", "write", "read"; NULL for anything else. */
const char *ql_ep_type_name(enum ql_ep_type type);
/* The reverse; -EINVAL for an unknown name. */
int ql_ep_type_parse(const char *name, enum ql_ep_type *type);

/* ---- the specification (the YAML file) ------------------------------ */

struct ql_ep_spec;

struct ql_ep_info {
	const char *path; /* valid while the spec (or server) lives */
	enum ql_ep_type type;
	size_t size;
};

/* Load a YAML endpoints file. -EINVAL with the detail "FILE:LINE: message"
 * for the first problem (syntax, unknown key, bad type, size out of range,
 * a path given twice with one type, a version other than 1). */
int ql_ep_spec_load(const char *file, struct ql_ep_spec **spec);
/* An empty specification, to fill with ql_ep_spec_add. */
int ql_ep_spec_create(struct ql_ep_spec **spec);
/* -EINVAL (path not 1..127 bytes starting with '/', or with bytes outside
 * printable ASCII; size 0 or over QL_EP_SIZE_MAX; unknown type), -EEXIST
 * (path already there with this type), -ENOSPC (QL_EP_MAX_ENDPOINTS). */
int ql_ep_spec_add(struct ql_ep_spec *spec, const char *path, enum ql_ep_type type, size_t size);
int ql_ep_spec_count(const struct ql_ep_spec *spec);
/* Endpoint i (0..count-1) in file order; -ERANGE past the end. */
int ql_ep_spec_get(const struct ql_ep_spec *spec, int i, struct ql_ep_info *info);
void ql_ep_spec_free(struct ql_ep_spec *spec);

/* ---- server ----------------------------------------------------------- */

struct ql_ep_server;

/* What a handler is given. */
struct ql_ep_call {
	const char *path;
	enum ql_ep_type type;
	void *buf;   /* the endpoint's registered buffer */
	size_t size; /* its size */
	/* send/write: the bytes that landed (from offset 0). receive: in, the
	 * client's capacity (at most size); out, how many bytes to send.
	 * read: size (the handler prepares the whole buffer). */
	size_t len;
	uint64_t conn; /* the connection it is for (1, 2, ... in accept order) */
};
/* Return 0, or a negative errno: for receive and for the first read of a
 * connection the client's call fails with it; for send and write, which
 * the client does not wait for, it is counted (handler_errors). */
typedef int (*ql_ep_handler_fn)(struct ql_ep_call *call, void *arg);

struct ql_ep_server_opts {
	const char *device; /* verbs device URI; NULL: "soft+shm://qlink-ep" */
	const char *
		listen; /* "HOST:PORT", "[IPV6]:PORT" (TCP) or "unix:PATH"; NULL: "127.0.0.1:7471" */
	int max_conns;	/* 0: QL_EP_DEFAULT_MAX_CONNS */
	int handshake_ms; /* a client must finish its hello in this; 0: 1000 */
	/* after this long without an event, ql_ep_server_poll sleeps in
	 * poll(2) on the sockets for 1 ms at a time (a request then waits up to
	 * that); 0: 1000 us; < 0: never sleep (busy-poll, for benchmarks) */
	int idle_us;
	/* TCP: connections one source address may hold at once; 0:
	 * QL_EP_DEFAULT_MAX_PER_SOURCE. A connection still in its hello gives
	 * way (is closed) when its source, or the table, is full and another
	 * connects: idle connections cannot lock the service out. */
	int max_per_source;
};

/* Open the device, allocate and register every endpoint's buffer (zeroed)
 * and listen. The spec is copied. */
int ql_ep_server_create(const struct ql_ep_spec *spec, const struct ql_ep_server_opts *opts,
			struct ql_ep_server **srv);
/* Attach a handler to (path, type); -ENOENT if there is no such endpoint.
 * An endpoint without one still serves (its buffer is what it is). */
int ql_ep_server_handle(struct ql_ep_server *srv, const char *path, enum ql_ep_type type,
			ql_ep_handler_fn fn, void *arg);
/* The buffer of (path, type) and its size; NULL if none. */
void *ql_ep_server_buffer(struct ql_ep_server *srv, const char *path, enum ql_ep_type type,
			  size_t *size);
/* The address clients connect to ("127.0.0.1:40123", "unix:/tmp/s"),
 * with the port the kernel chose for port 0. Like snprintf. */
int ql_ep_server_address(const struct ql_ep_server *srv, char *buf, size_t len);
/* Serve for up to timeout_ms (0: one pass, -1: until something happens):
 * accept and set up connections, dispatch requests and acknowledgements,
 * close what died. Busy-polls the completion queues; the sockets are
 * looked at about every millisecond. Returns the number of events handled
 * (0 on timeout) or a negative errno on a failure of the server itself.
 * Idle, it sleeps as ql_ep_server_opts.idle_us says. */
int ql_ep_server_poll(struct ql_ep_server *srv, int timeout_ms);
/* ql_ep_server_poll until *stop becomes non-zero. */
int ql_ep_server_run(struct ql_ep_server *srv, const volatile int *stop);

struct ql_ep_server_stats {
	uint64_t conns_accepted; /* connections set up */
	uint64_t conns_refused;	 /* handshakes refused (bad hello, too many, ...) */
	uint64_t conns_closed;	 /* connections ended, for whatever reason */
	uint64_t conns_open;
	uint64_t requests;	   /* requests answered (including refusals) */
	uint64_t requests_refused; /* answered with an error status */
	uint64_t requests_busy;	   /* send requests told to retry (buffer taken) */
	uint64_t acks;		   /* write/read acknowledgements taken */
	uint64_t data;		   /* send payloads received */
	uint64_t violations;	   /* protocol violations (each closed its connection) */
	uint64_t handler_errors;   /* handlers that returned an error */
};
int ql_ep_server_stats(const struct ql_ep_server *srv, struct ql_ep_server_stats *st);
void ql_ep_server_destroy(struct ql_ep_server *srv);

/* ---- client ----------------------------------------------------------- */

struct ql_ep_client;

/* Open `device` (a verbs URI), connect to the server at `address`
 * ("HOST:PORT", "[IPV6]:PORT" or "unix:PATH"). -ECONNREFUSED, -ETIMEDOUT, -EPROTO (not an
 * endpoint server), or what the server refused with. */
int ql_ep_client_connect(const char *device, const char *address, struct ql_ep_client **c);
void ql_ep_client_close(struct ql_ep_client *c);
/* How long one call waits for the server (default 5000 ms). */
void ql_ep_client_set_timeout(struct ql_ep_client *c, int timeout_ms);

/* Registered memory of this connection: calls given a buffer inside it
 * move the data straight from/into it (zero copy); any other buffer is
 * copied through a bounce buffer. Zeroed. NULL with errno on failure. */
void *ql_ep_client_alloc(struct ql_ep_client *c, size_t len);
int ql_ep_client_free(struct ql_ep_client *c, void *buf);

/* Each returns 0 (recv: the bytes received) or a negative errno with a
 * detail: -ENOENT (no such path), -EPROTOTYPE (the path exists, not with
 * this type), -EMSGSIZE (len over the endpoint's size; recv: the handler
 * produced more than cap), what the handler returned (recv, first read),
 * -ETIMEDOUT, -ENOTCONN (the connection broke earlier: reconnect). After a
 * refused request the connection stays usable. */
int ql_ep_send(struct ql_ep_client *c, const char *path, const void *buf, size_t len);
long ql_ep_recv(struct ql_ep_client *c, const char *path, void *buf, size_t cap);
int ql_ep_write(struct ql_ep_client *c, const char *path, const void *buf, size_t len);
int ql_ep_read(struct ql_ep_client *c, const char *path, void *buf, size_t len);
/* The size of a write/read endpoint (fetching and caching its descriptor
 * if needed); errors as above. */
int ql_ep_client_size(struct ql_ep_client *c, const char *path, enum ql_ep_type type, size_t *size);

struct ql_ep_client_stats {
	uint64_t requests; /* request/reply round trips made */
	uint64_t cached;   /* write/read calls served from the descriptor cache */
	uint64_t bounced;  /* calls that copied through the bounce buffer */
};
int ql_ep_client_stats(const struct ql_ep_client *c, struct ql_ep_client_stats *st);

#ifdef __cplusplus
}
#endif
#endif
