/*
 * The daemon's state, shared by daemon.c and dispatcher.c (internal).
 */
#ifndef QL_DAEMON_INT_H
#define QL_DAEMON_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "qlink/daemon.h"
#include "qlink/dispatcher.h"

struct ql_daemon {
	struct ql_daemon_config cfg;
	struct ql_channel *ch;
	struct ql_rpc_table *table;
	pthread_mutex_t lock;	    /* guards disp and own */
	struct ql_dispatcher *disp; /* serving it now, NULL when detached */
	struct ql_dispatcher *own;  /* the private one of ql_daemon_start */
	_Atomic int stop;	    /* give up a burst stuck without buffers */
	struct ql_daemon_stats st;
	uint64_t *fn_calls;
	uint64_t *fn_errors;
	uint64_t tick_ns_q32; /* ns per TSC tick, 32.32 fixed point */
	struct ql_hist hist;
};

#define QL_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

#endif
