/* SPDX-License-Identifier: MIT */
/*
 * The GPU dispatcher's host side (include/qlink/gpu.h): the channel (ring,
 * mlx5-mode QP and send CQ, response buffers), the function table, and the
 * runner of the dispatch body: the persistent kernel (gpu_cuda.cu) or, in
 * the emulation, a host thread or the caller's loop (caller progress:
 * ql_gpu_dispatcher_progress, docs/progress.md). docs/gpu.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/gpu_body.h"
#include "gpu/gpu_int.h"
#include "providers/common/progress.h"
#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/gpu.h"
#include "qlink/mlx5.h"
#include "qlink/ring.h"

#define GPU_DEF_SLOTS 64u
#define GPU_DEF_SLOT_SIZE 256u
#define GPU_DEF_FUNCTIONS 64u
#define GPU_MAX_FUNCTIONS 1024u
#define GPU_MAX_TX 1024u
#define GPU_STOP_TIMEOUT_NS 5000000000ull
/* emulation: yield the CPU after this many empty polls in a row (the
 * machine's other work gets its turn; the request path never yields) */
#define GPU_EMU_IDLE_YIELD 64u
/* caller progress: steps per ql_gpu_dispatcher_progress at most */
#define GPU_CALLER_BUDGET 32u
/* ql_gpu_dispatcher_serve_until: idle turns between two looks at the fd */
#define GPU_SERVE_POLL_EVERY 256u

struct ql_gpu_dispatcher {
	struct ql_device *dev;
	enum ql_gpu_mode mode; /* DEVICE or EMULATE */
	int cpu;
	uint32_t num_slots, slot_size;
	enum ql_gpu_transport transport;
	struct ql_hsb_params hsb; /* hsb: the geometry (qpn, gid, rkey at local_params) */
	uint8_t *pages;		  /* hsb: the pages, registered at iova 0 */
	size_t pages_len;
	struct ql_mr *pages_mr;
	struct ql_pd *pd;
	struct ql_mem_attr mem; /* what the ring/pages and response buffers are */
	bool mem_device;	/* QL_MEM_PATH_DEVICE: not for the CPU */
	uint8_t *ring;
	size_t ring_len;
	struct ql_mr *ring_mr;
	uint8_t *tx;
	size_t tx_len;
	uint32_t tx_count, tx_stride;
	struct ql_mr *tx_mr;
	struct ql_cq *scq, *rcq;
	struct ql_qp *qp;
	bool connected;

	/* the function table: host view (names for duplicates) */
	uint32_t max_functions, nfns;
	struct ql_gpu_entry *fns;
	char **names;

	uint8_t *scratch;	  /* emulation: the request copy */
	struct ql_gpu_shared *sh; /* host address of the shared words */
	struct ql_gpu_body body;  /* the body's state between runs */

	bool started;		       /* a run was launched and not yet reaped */
	enum ql_gpu_progress progress; /* as configured */
	bool caller;		       /* this run's body is the caller's */
	uint32_t idle;		       /* caller: empty steps in a row */
	pthread_t thread;
	struct ql__gpu_cuda *cuda;
	void *sh_dev;
};

const char *ql_gpu_mode_str(enum ql_gpu_mode m)
{
	switch (m) {
	case QL_GPU_MODE_AUTO:
		return "auto";
	case QL_GPU_MODE_DEVICE:
		return "device";
	case QL_GPU_MODE_EMULATE:
		return "emulate";
	}
	return "?";
}

int ql_gpu_mode_parse(const char *s, enum ql_gpu_mode *m)
{
	static const enum ql_gpu_mode all[] = { QL_GPU_MODE_AUTO, QL_GPU_MODE_DEVICE,
						QL_GPU_MODE_EMULATE };

	if (!s || !m)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(s, ql_gpu_mode_str(all[i]))) {
			*m = all[i];
			return 0;
		}
	return ql_error_set(-EINVAL, "gpu: mode '%s' is none of auto, device, emulate", s);
}

int ql_gpu_available(char *why, size_t why_len)
{
#ifdef QLINK_HAVE_CUDA
	return ql__gpu_cuda_probe(0, why, why_len);
#else
	if (why && why_len)
		snprintf(why, why_len, "built without CUDA (no nvcc when qlink was configured)");
	return 0;
#endif
}

static uint32_t pow2_floor(uint32_t v)
{
	uint32_t p = 1;

	while (p * 2 <= v && p < (1u << 31))
		p *= 2;
	return p;
}

void ql_gpu_dispatcher_destroy(struct ql_gpu_dispatcher *d)
{
	if (!d)
		return;
	ql_gpu_dispatcher_stop(d);
	if (d->qp)
		ql_qp_destroy(d->qp);
	if (d->scq)
		ql_cq_destroy(d->scq);
	if (d->rcq)
		ql_cq_destroy(d->rcq);
	if (d->ring_mr)
		ql_mr_dereg(d->ring_mr);
	if (d->tx_mr)
		ql_mr_dereg(d->tx_mr);
	if (d->pages_mr)
		ql_mr_dereg(d->pages_mr);
#ifdef QLINK_HAVE_CUDA
	/* unregisters the host memory before it is freed below */
	if (d->cuda)
		ql__gpu_cuda_close(d->cuda);
#endif
	if (d->ring)
		ql_pd_mem_free(d->pd, d->ring);
	if (d->tx)
		ql_pd_mem_free(d->pd, d->tx);
	if (d->pages)
		ql_pd_mem_free(d->pd, d->pages);
	if (d->pd)
		ql_pd_free(d->pd);
	if (d->names)
		for (uint32_t i = 0; i < d->nfns; i++)
			free(d->names[i]);
	free(d->names);
	free(d->fns);
	free(d->scratch);
	if (!d->sh_dev)
		free(d->sh);
	free(d);
}

static int resolve_mode(struct ql_gpu_dispatcher *d, const struct ql_gpu_config *cfg)
{
	char why[160];
	enum ql_gpu_mode m = cfg ? cfg->mode : QL_GPU_MODE_AUTO;

	if (m == QL_GPU_MODE_EMULATE) {
		d->mode = m;
		return 0;
	}
	if (m != QL_GPU_MODE_AUTO && m != QL_GPU_MODE_DEVICE)
		return ql_error_set(-EINVAL, "gpu: unknown mode %d", (int)m);
#ifdef QLINK_HAVE_CUDA
	if (ql__gpu_cuda_probe(cfg ? cfg->cuda_device : 0, why, sizeof(why))) {
		d->mode = QL_GPU_MODE_DEVICE;
		return 0;
	}
#else
	snprintf(why, sizeof(why), "built without CUDA (no nvcc when qlink was configured)");
#endif
	if (m == QL_GPU_MODE_DEVICE)
		return ql_error_set(-ENODEV, "gpu: no GPU to run the dispatch kernel: %s", why);
	d->mode = QL_GPU_MODE_EMULATE;
	return 0;
}

/* The channel's memory, of the configured kind (ql_gpu_config.memory):
 * host, or GPU memory through the verbs layer (docs/verbs.md "GPU
 * memory"), device memory on a NIC that reaches the GPU, host memory
 * mapped into it on the soft NICs. The emulation cannot read device
 * memory. */
static int channel_mem(struct ql_gpu_dispatcher *d, size_t len, void **mem)
{
	struct ql_mem_info mi;
	int ret = ql_pd_mem_alloc_attr(d->pd, len, &d->mem, mem);

	if (ret || d->mem.kind != QL_MEM_GPU)
		return ret;
	ret = ql_pd_mem_query(d->pd, *mem, &mi);
	if (ret)
		return ret;
	d->mem_device = mi.path == QL_MEM_PATH_DEVICE;
	if (d->mem_device && d->mode != QL_GPU_MODE_DEVICE)
		return ql_error_set(-EOPNOTSUPP,
				    "gpu: the emulation cannot read GPU device memory (QL_MEM_GPU "
				    "on this device): run the kernel, or QL_MEM_HOST");
	return 0;
}

/* What both transports' channels have: tx_count response buffers of
 * resp_size (and the canary) each, 64-aligned and registered; a send CQ of
 * tx_count entries, a receive CQ of recv_wr, and a QP of qp_type, all in
 * mlx5 mode, with the body's views of the send queue and its CQ. */
static int make_tx_qp(struct ql_gpu_dispatcher *d, uint32_t resp_size, enum ibv_qp_type qp_type,
		      uint32_t recv_wr)
{
	struct ql_qp_setup qs = { .qp_type = qp_type,
				  .send_wr = d->tx_count,
				  .recv_wr = recv_wr,
				  .flags = QL_QP_INIT_MLX5 };
	void *mem;
	int ret;

	d->tx_stride = (resp_size + QL_GPU_CANARY + 63u) & ~63u;
	d->tx_len = (size_t)d->tx_count * d->tx_stride;
	ret = channel_mem(d, d->tx_len, &mem);
	if (ret)
		return ret;
	d->tx = mem;
	ret = ql_mr_reg(d->pd, d->tx, d->tx_len, IBV_ACCESS_LOCAL_WRITE, &d->tx_mr);
	if (ret)
		return ret;
	ret = ql_qp_setup(d->pd, &qs, &d->scq, &d->rcq, &d->qp, NULL);
	if (ret)
		return ret;
	ret = ql_qp_mlx5(d->qp, &d->body.tx.qp);
	if (!ret)
		ret = ql_cq_mlx5(d->scq, &d->body.tx.cq);
	if (ret == -EOPNOTSUPP)
		return ql_error_set(ret, "gpu: the device's provider gives no mlx5 queues "
					 "(soft:// and soft+shm:// do, ibv:// on mlx5)");
	if (ret)
		return ret;
	if (d->body.tx.qp.sq.wqe_cnt < d->tx_count)
		return ql_error_set(-ENOSPC, "gpu: send queue of %u entries for %u responses",
				    d->body.tx.qp.sq.wqe_cnt, d->tx_count);
	return 0;
}

/* The hsb transport's channel (as hsb_channel.c's, on mlx5 queues): the
 * pages registered at iova 0 for REMOTE_WRITE, a UC QP with a receive WQE
 * per page and a receive CQE per WQE, response buffers of resp_size (and
 * the canary) each. The body re-posts a frame's WQE as soon as it copied
 * the frame, so num_pages WQEs keep one posted per page the QCS may
 * write. */
static int make_hsb_channel(struct ql_gpu_dispatcher *d)
{
	void *mem;
	int ret;

	d->pages_len = (size_t)d->hsb.num_pages * d->hsb.page_size;
	ret = channel_mem(d, d->pages_len, &mem);
	if (ret)
		return ret;
	d->pages = mem; /* zeroed */
	ret = ql_mr_reg_iova(d->pd, d->pages, d->pages_len, 0,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &d->pages_mr);
	if (ret)
		return ret;
	ret = make_tx_qp(d, d->hsb.resp_size, IBV_QPT_UC, d->hsb.num_pages);
	if (ret)
		return ret;
	ret = ql_cq_mlx5(d->rcq, &d->body.hsb.rcq);
	if (ret)
		return ret;
	if (d->body.tx.qp.rq.wqe_cnt < d->hsb.num_pages ||
	    d->body.hsb.rcq.cqe_cnt < d->hsb.num_pages)
		return ql_error_set(-ENOSPC, "gpu: receive queues of %u/%u entries for %u pages",
				    d->body.tx.qp.rq.wqe_cnt, d->body.hsb.rcq.cqe_cnt,
				    d->hsb.num_pages);
	d->body.hsb.pages = d->pages;
	d->body.hsb.num_pages = d->hsb.num_pages;
	d->body.hsb.page_size = d->hsb.page_size;
	d->body.hsb.resp_size = d->hsb.resp_size;
	d->body.hsb.frame_len = d->hsb.frame_len;
	return 0;
}

static int make_channel(struct ql_gpu_dispatcher *d)
{
	void *mem;
	int ret;

	ret = ql_pd_alloc(d->dev, &d->pd);
	if (ret)
		return ret;
	if (d->transport == QL_GPU_TRANSPORT_HSB)
		return make_hsb_channel(d);
	d->ring_len = ql_ring_bytes(d->num_slots, d->slot_size);
	ret = channel_mem(d, d->ring_len, &mem);
	if (ret)
		return ret;
	d->ring = mem; /* zeroed */
	if (d->mem_device) {
		/* formatted here, copied there */
		void *tmp = calloc(1, d->ring_len);

		if (!tmp)
			return -ENOMEM;
		ql_ring_format(tmp, d->num_slots, d->slot_size);
		ret = ql_pd_mem_write(d->pd, d->ring, tmp, d->ring_len);
		free(tmp);
		if (ret)
			return ret;
	} else {
		ql_ring_format(d->ring, d->num_slots, d->slot_size);
	}
	ret = ql_mr_reg(d->pd, d->ring, d->ring_len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &d->ring_mr);
	if (ret)
		return ret;
	/* a response buffer per send queue entry: the response (slot_size at
	 * most, the client's receive buffers) and the canary, 64-aligned */
	d->tx_count = pow2_floor(d->num_slots < GPU_MAX_TX ? d->num_slots : GPU_MAX_TX);
	return make_tx_qp(d, d->slot_size, IBV_QPT_RC, 1);
}

int ql_gpu_dispatcher_create(struct ql_device *dev, const struct ql_gpu_config *cfg,
			     struct ql_gpu_dispatcher **out)
{
	struct ql_gpu_dispatcher *d;
	int ret;

	if (!dev || !out)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->dev = dev;
	d->cpu = cfg ? cfg->cpu : -1;
	d->num_slots = cfg && cfg->num_slots ? cfg->num_slots : GPU_DEF_SLOTS;
	d->slot_size = cfg && cfg->slot_size ? cfg->slot_size : GPU_DEF_SLOT_SIZE;
	d->max_functions = cfg && cfg->max_functions ? cfg->max_functions : GPU_DEF_FUNCTIONS;
	d->transport = cfg ? cfg->transport : QL_GPU_TRANSPORT_RING;
	d->progress = cfg ? cfg->progress : QL_GPU_PROGRESS_AUTO;
	if ((unsigned)d->progress > QL_GPU_PROGRESS_CALLER) {
		ret = ql_error_set(-EINVAL, "gpu: unknown progress mode %d", (int)d->progress);
		goto err;
	}
	if (cfg && cfg->bad_requests != 0 && cfg->bad_requests != 1) {
		ret = ql_error_set(-EINVAL,
				   "gpu: bad_requests %d is neither answer (0) nor drop (1)",
				   cfg->bad_requests);
		goto err;
	}
	if (d->transport == QL_GPU_TRANSPORT_HSB) {
		const struct ql_hsb_channel_config *h = &cfg->hsb;
		uint32_t ntx;

		d->hsb.num_pages = h->num_pages ? h->num_pages : QL_HSB_DEFAULT_PAGES;
		d->hsb.page_size = h->page_size ? h->page_size : QL_HSB_DEFAULT_PAGE_SIZE;
		/* as the CPU channel: the largest frame its metadata leaves */
		d->hsb.frame_len = h->frame_len ? h->frame_len :
				   d->hsb.page_size > QL_HSB_METADATA_SIZE ?
						  d->hsb.page_size - QL_HSB_METADATA_SIZE :
						  d->hsb.page_size;
		d->hsb.resp_size = h->resp_size ? h->resp_size : QL_HSB_DEFAULT_RESP_SIZE;
		ret = ql_hsb_params_check(&d->hsb);
		if (ret)
			goto err;
		ntx = h->tx_buffers ? h->tx_buffers : d->hsb.num_pages;
		d->tx_count = pow2_floor(ntx < GPU_MAX_TX ? ntx : GPU_MAX_TX);
		/* the request's copy: a whole page */
		d->slot_size = d->hsb.page_size;
		d->num_slots = 0;
	} else if (d->transport != QL_GPU_TRANSPORT_RING) {
		ret = ql_error_set(-EINVAL, "gpu: unknown transport %d", (int)d->transport);
		goto err;
	} else {
		ret = ql_ring_check_geometry(d->num_slots, d->slot_size);
		if (ret)
			goto err;
	}
	if (d->max_functions > GPU_MAX_FUNCTIONS) {
		ret = ql_error_set(-EINVAL, "gpu: max_functions %u is over %u", d->max_functions,
				   GPU_MAX_FUNCTIONS);
		goto err;
	}
	ret = resolve_mode(d, cfg);
	if (ret)
		goto err;
	d->mem.kind = cfg ? cfg->memory : QL_MEM_HOST;
	d->mem.cuda_device = cfg ? cfg->cuda_device : 0;
	d->fns = calloc(d->max_functions, sizeof(*d->fns));
	d->names = calloc(d->max_functions, sizeof(*d->names));
	d->scratch = aligned_alloc(64, d->slot_size);
	if (!d->fns || !d->names || !d->scratch) {
		ret = -ENOMEM;
		goto err;
	}
	ret = make_channel(d);
	if (ret)
		goto err;
#ifdef QLINK_HAVE_CUDA
	if (d->mode == QL_GPU_MODE_DEVICE) {
		void *p;

		ret = ql__gpu_cuda_open(cfg ? cfg->cuda_device : 0, &d->cuda);
		if (ret)
			goto err;
		ret = ql__gpu_cuda_alloc_mapped(d->cuda, sizeof(*d->sh), &p, &d->sh_dev);
		if (ret)
			goto err;
		d->sh = p;
	}
#endif
	if (!d->sh) {
		d->sh = aligned_alloc(64, (sizeof(*d->sh) + 63) & ~(size_t)63);
		if (!d->sh) {
			ret = -ENOMEM;
			goto err;
		}
	}
	memset(d->sh, 0, sizeof(*d->sh));
	d->body.ring = d->ring;
	d->body.num_slots = d->num_slots;
	d->body.slot_size = d->slot_size;
	d->body.scratch = d->scratch;
	d->body.fns = d->fns;
	d->body.sh = d->sh;
	d->body.idle_yield = GPU_EMU_IDLE_YIELD;
	d->body.drop_refused = cfg && cfg->bad_requests == 1 ? 1 : 0;
	d->body.tx.buf = d->tx;
	d->body.tx.iova = (uint64_t)(uintptr_t)d->tx;
	d->body.tx.count = d->tx_count;
	d->body.tx.stride = d->tx_stride;
	d->body.tx.lkey = ql_mr_lkey(d->tx_mr);
	*out = d;
	return 0;
err:
	ql_gpu_dispatcher_destroy(d);
	return ret;
}

enum ql_gpu_mode ql_gpu_dispatcher_mode(const struct ql_gpu_dispatcher *d)
{
	return d->mode;
}

bool ql_gpu_dispatcher_is_running(const struct ql_gpu_dispatcher *d)
{
	return d && d->started && __atomic_load_n(&d->sh->running, __ATOMIC_ACQUIRE);
}

int ql_gpu_dispatcher_register(struct ql_gpu_dispatcher *d, const struct ql_gpu_function *f)
{
	struct ql_gpu_entry *e;
	ql_gpu_handler_fn fn;

	if (!d || !f || !f->name || !f->fn)
		return ql_error_set(-EINVAL, "gpu: a function needs a name and a handler");
	if (d->started)
		return ql_error_set(-EBUSY, "gpu: register before start");
	for (uint32_t i = 0; i < d->nfns; i++)
		if (d->fns[i].id == f->id || !strcmp(d->names[i], f->name))
			return ql_error_set(-EEXIST, "gpu: '%s' (id 0x%08x) is already registered",
					    f->name, f->id);
	if (d->nfns == d->max_functions)
		return ql_error_set(-ENOSPC, "gpu: the function table is full (%u)",
				    d->max_functions);
	fn = f->fn;
	if (d->mode == QL_GPU_MODE_DEVICE) {
#ifdef QLINK_HAVE_CUDA
		int ret;

		if (!f->dev_resolve)
			return ql_error_set(-EINVAL,
					    "gpu: '%s' was not compiled for the device (nvcc)",
					    f->name);
		ret = f->dev_resolve(&fn);
		if (ret)
			return ql_error_set(ret, "gpu: no device address for '%s'", f->name);
#endif
	}
	d->names[d->nfns] = strdup(f->name);
	if (!d->names[d->nfns])
		return -ENOMEM;
	e = &d->fns[d->nfns];
	e->id = f->id;
	e->typed = f->typed ? 1 : 0;
	e->args_size = f->args_size;
	e->results_size = f->results_size;
	e->fn = fn;
	e->ctx = f->ctx;
	d->nfns++;
	return 0;
}

int ql_gpu_dispatcher_local_params(struct ql_gpu_dispatcher *d, struct ql_conn_params *p)
{
	int ret;

	if (!d || !p)
		return -EINVAL;
	ret = ql_qp_local_params(d->qp, p);
	if (ret)
		return ret;
	if (d->transport == QL_GPU_TRANSPORT_HSB) {
		struct ql_hsb_params h;

		ret = ql_gpu_dispatcher_hsb_params(d, &h);
		if (ret)
			return ret;
		ql_hsb_params_to_conn(&h, p);
		return 0;
	}
	p->vaddr = (uint64_t)(uintptr_t)d->ring;
	p->rkey = ql_mr_rkey(d->ring_mr);
	p->length = d->ring_len;
	p->num_slots = d->num_slots;
	p->slot_size = d->slot_size;
	p->qp_type = IBV_QPT_RC;
	return 0;
}

static int connect_hsb(struct ql_gpu_dispatcher *d, const struct ql_conn_params *qcs,
		       const struct ql_qp_connect_opts *opts);

int ql_gpu_dispatcher_connect(struct ql_gpu_dispatcher *d, const struct ql_conn_params *client,
			      const struct ql_qp_connect_opts *opts)
{
	int ret;

	if (!d || !client)
		return -EINVAL;
	if (d->started)
		return ql_error_set(-EBUSY, "gpu: connect while stopped");
	if (d->transport == QL_GPU_TRANSPORT_HSB)
		return connect_hsb(d, client, opts);
	ret = ql_qp_connect(d->qp, client, opts);
	if (ret)
		return ret;
	d->connected = true;
	return 0;
}

int ql_gpu_dispatcher_hsb_params(struct ql_gpu_dispatcher *d, struct ql_hsb_params *p)
{
	struct ql_conn_params q;
	struct ql_hsb_params h;
	int ret;

	if (!d || !p || d->transport != QL_GPU_TRANSPORT_HSB)
		return ql_error_set(-EINVAL, "gpu: not an hsb dispatcher");
	ret = ql_qp_local_params(d->qp, &q);
	if (ret)
		return ret;
	h = d->hsb;
	h.qpn = q.qpn;
	h.gid = q.gid;
	h.mtu = q.mtu;
	h.rkey = ql_mr_rkey(d->pages_mr);
	h.page_addr = 0;
	*p = h;
	return 0;
}

/* As ql_hsb_channel_connect: UC, PSN 0 both ways, REMOTE_WRITE only; then
 * a receive WQE per page, through the mlx5 receive queue. */
static int connect_hsb(struct ql_gpu_dispatcher *d, const struct ql_conn_params *qcs,
		       const struct ql_qp_connect_opts *opts)
{
	struct ql_mlx5_qp *qp = &d->body.tx.qp;
	struct ql_qp_connect_opts o;
	struct ql_conn_params peer;
	int ret;

	if (opts)
		o = *opts;
	else
		ql_qp_connect_opts_default(&o);
	o.access = IBV_ACCESS_REMOTE_WRITE;
	peer = *qcs;
	peer.psn = 0;
	o.local_psn = 0; /* and we send from 0 */
	ret = ql_qp_connect(d->qp, &peer, &o);
	if (ret)
		return ret;
	if (!d->connected)
		while (qp->rq.head - qp->rq.tail < d->hsb.num_pages)
			if (ql_mlx5_rq_post(qp, NULL, 0))
				return ql_error_set(-EIO, "gpu: posting %u receives failed",
						    d->hsb.num_pages);
	d->connected = true;
	return 0;
}

/* The emulation's progress this run: ?progress= of the config, AUTO
 * weighed with the shared rule (one spinning thread more: the body's). */
static bool emu_in_caller(const struct ql_gpu_dispatcher *d)
{
	enum ql__progress_mode m = d->progress == QL_GPU_PROGRESS_THREAD ? QL__PROGRESS_THREAD :
				   d->progress == QL_GPU_PROGRESS_CALLER ? QL__PROGRESS_CALLER :
									   ql__progress_default();

	return ql__progress_resolve(m, 1) == QL__PROGRESS_CALLER;
}

static void *emu_main(void *arg)
{
	struct ql_gpu_dispatcher *d = arg;

	if (d->cpu >= 0)
		ql_cpu_pin(d->cpu);
	ql_gpu_body_run(&d->body);
	return NULL;
}

#ifdef QLINK_HAVE_CUDA
/* The body as the device sees it: every pointer translated. */
static int device_body(struct ql_gpu_dispatcher *d, struct ql_gpu_body *b)
{
	struct ql_mlx5_qp *qp = &b->tx.qp;
	struct ql_mlx5_cq *cq = &b->tx.cq;
	void *p;
	int ret;

	*b = d->body;
#define MAP(field, len)                                                      \
	do {                                                                 \
		ret = ql__gpu_cuda_map(d->cuda, (void *)(field), (len), &p); \
		if (ret)                                                     \
			return ret;                                          \
		(field) = (__typeof__(field))p;                              \
	} while (0)
	/* device memory (QL_MEM_GPU on a NIC that reaches the GPU): the
	 * pointers are the kernel's already */
	if (b->ring && !d->mem_device)
		MAP(b->ring, d->ring_len);
	if (b->hsb.pages) {
		if (!d->mem_device)
			MAP(b->hsb.pages, d->pages_len);
		MAP(b->hsb.rcq.buf, (size_t)b->hsb.rcq.cqe_cnt * b->hsb.rcq.cqe_size);
		MAP(b->hsb.rcq.dbrec, 8);
	}
	if (!d->mem_device)
		MAP(b->tx.buf, d->tx_len);
	MAP(qp->sq.buf, (size_t)qp->sq.wqe_cnt * qp->sq.stride);
	MAP(qp->sq.dbrec, 8);
	if (qp->rq.buf && qp->rq.wqe_cnt)
		MAP(qp->rq.buf, (size_t)qp->rq.wqe_cnt * qp->rq.stride);
	if (qp->rq.dbrec)
		MAP(qp->rq.dbrec, 8);
	MAP(qp->bf_reg, qp->bf_size ? 2 * (size_t)qp->bf_size : 64);
	MAP(cq->buf, (size_t)cq->cqe_cnt * cq->cqe_size);
	MAP(cq->dbrec, 8);
#undef MAP
	ret = ql__gpu_cuda_upload(d->cuda, d->fns, sizeof(*d->fns) * (d->nfns ? d->nfns : 1), &p);
	if (ret)
		return ret;
	b->fns = p;
	ret = ql__gpu_cuda_upload(d->cuda, d->scratch, d->slot_size, &p);
	if (ret)
		return ret;
	b->scratch = p;
	b->sh = d->sh_dev;
	b->idle_yield = 0;
	return 0;
}
#endif

int ql_gpu_dispatcher_start(struct ql_gpu_dispatcher *d)
{
	int ret;

	if (!d)
		return -EINVAL;
	if (d->started)
		return ql_error_set(-EBUSY, "gpu: the dispatcher runs already");
	if (!d->connected)
		return ql_error_set(-ENOTCONN, "gpu: connect before start");
	d->body.nfns = d->nfns;
	__atomic_store_n(&d->sh->stop, 0, __ATOMIC_RELAXED);
	d->sh->error = 0;
	/* running from now: is_running must not say no before the body
	 * says yes */
	__atomic_store_n(&d->sh->running, 1, __ATOMIC_RELEASE);
	if (d->mode == QL_GPU_MODE_DEVICE) {
#ifdef QLINK_HAVE_CUDA
		struct ql_gpu_body b;

		ret = device_body(d, &b);
		if (!ret)
			ret = ql__gpu_cuda_launch(d->cuda, &b);
#else
		ret = -ENODEV;
#endif
	} else if (emu_in_caller(d)) {
		/* no thread: ql_gpu_dispatcher_progress runs the body */
		d->caller = true;
		d->idle = 0;
		ret = 0;
	} else {
		d->caller = false;
		ret = -pthread_create(&d->thread, NULL, emu_main, d);
		if (ret)
			ql_error_set(ret, "gpu: cannot start the emulation thread");
		else
			ql__progress_threads_add(1);
	}
	if (ret) {
		__atomic_store_n(&d->sh->running, 0, __ATOMIC_RELEASE);
		return ret;
	}
	d->started = true;
	return 0;
}

int ql_gpu_dispatcher_stop(struct ql_gpu_dispatcher *d)
{
	uint64_t t0;
	int ret = 0;

	if (!d || !d->started)
		return 0;
	__atomic_store_n(&d->sh->stop, 1, __ATOMIC_RELEASE);
	if (d->caller) {
		/* the body's end, here (unless it failed and ended already) */
		if (__atomic_load_n(&d->sh->running, __ATOMIC_ACQUIRE))
			ql_gpu_body_finish(&d->body, 0);
		d->started = false;
		return 0;
	}
	t0 = ql_clock_ns();
	while (__atomic_load_n(&d->sh->running, __ATOMIC_ACQUIRE)) {
		struct timespec ts = { 0, 100000 };

		if (ql_clock_ns() - t0 > GPU_STOP_TIMEOUT_NS)
			return ql_error_set(-ETIMEDOUT, "gpu: the dispatch body did not stop");
		nanosleep(&ts, NULL);
	}
	if (d->mode == QL_GPU_MODE_DEVICE) {
#ifdef QLINK_HAVE_CUDA
		struct ql_gpu_body b;

		ret = ql__gpu_cuda_wait(d->cuda, GPU_STOP_TIMEOUT_NS, &b);
		if (!ret) {
			/* keep the host's pointers, take the device's progress */
			d->body.next = b.next;
			d->body.tx.posted = b.tx.posted;
			d->body.tx.done = b.tx.done;
			d->body.tx.failed = b.tx.failed;
			d->body.tx.qp.sq.head = b.tx.qp.sq.head;
			d->body.tx.qp.sq.tail = b.tx.qp.sq.tail;
			d->body.tx.qp.bf_offset = b.tx.qp.bf_offset;
			d->body.tx.cq.cons_index = b.tx.cq.cons_index;
			d->body.tx.qp.rq.head = b.tx.qp.rq.head;
			d->body.tx.qp.rq.tail = b.tx.qp.rq.tail;
			d->body.hsb.rcq.cons_index = b.hsb.rcq.cons_index;
			d->body.st = b.st;
		}
#endif
	} else {
		pthread_join(d->thread, NULL);
		ql__progress_threads_add(-1);
	}
	d->started = false;
	return ret;
}

bool ql_gpu_dispatcher_caller(const struct ql_gpu_dispatcher *d)
{
	return d && d->started && d->caller;
}

int ql_gpu_dispatcher_progress(struct ql_gpu_dispatcher *d)
{
	int work = 0;

	if (!d)
		return -EINVAL;
	if (!d->started || !d->caller)
		return ql_device_progress(d->dev);
	if (!__atomic_load_n(&d->sh->running, __ATOMIC_ACQUIRE))
		return d->sh->error ? d->sh->error : 0;
	for (uint32_t i = 0; i < GPU_CALLER_BUDGET; i++) {
		int ret = ql_gpu_body_step(&d->body);

		if (ret < 0) {
			ql_gpu_body_finish(&d->body, ret);
			return ret;
		}
		if (!ret) {
			/* (the stop word is ql_gpu_dispatcher_stop's, here);
			 * idle: the device's own progress (a caller-progress
			 * soft NIC's engine, between doorbells) */
			ql_gpu_body_idle(&d->body, &d->idle);
			if (ql_device_progress(d->dev) > 0)
				work++;
			break;
		}
		d->idle = 0;
		work += ret;
	}
	return work;
}

int ql_gpu_dispatcher_serve_until(struct ql_gpu_dispatcher *d, int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint32_t idle = 0;

	if (!d || fd < 0)
		return -EINVAL;
	for (;;) {
		int ret;

		if (!ql_gpu_dispatcher_caller(d)) {
			/* a thread or the GPU serves: only the device's
			 * progress, if it has any, keeps this loop awake */
			ret = ql_gpu_dispatcher_progress(d);
			if (ret > 0)
				continue;
			ret = poll(&p, 1, ret < 0 ? 0 : -1);
		} else {
			ret = ql_gpu_dispatcher_progress(d);
			if (ret < 0)
				return ret;
			if (ret > 0) {
				idle = 0;
				continue;
			}
			/* idle: the CPU to the machine's other work now and
			 * then, as the emulation's thread does (the request
			 * path never gets here) */
			if (++idle % GPU_EMU_IDLE_YIELD == 0)
				sched_yield();
			if (idle % GPU_SERVE_POLL_EVERY)
				continue;
			ret = poll(&p, 1, 0);
		}
		if (ret > 0)
			return 1;
		if (ret < 0 && errno != EINTR)
			return -errno;
	}
}

int ql_gpu_dispatcher_stats(const struct ql_gpu_dispatcher *d, struct ql_gpu_stats *st)
{
	const uint64_t *src;
	uint64_t *dst;

	if (!d || !st)
		return -EINVAL;
	src = (const uint64_t *)(const void *)&d->sh->st;
	dst = (uint64_t *)(void *)st;
	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	return 0;
}

int ql_gpu_dispatcher_error(const struct ql_gpu_dispatcher *d)
{
	if (!d)
		return -EINVAL;
	return __atomic_load_n(&d->sh->error, __ATOMIC_ACQUIRE);
}

int ql__gpu_dispatcher_step(struct ql_gpu_dispatcher *d)
{
	if (!d || d->started || d->mode != QL_GPU_MODE_EMULATE)
		return -EBUSY;
	d->body.nfns = d->nfns;
	return ql_gpu_body_step(&d->body);
}
