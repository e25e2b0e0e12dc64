/* SPDX-License-Identifier: MIT */
/*
 * soft+udp provider, the engine: one round of the NIC (receive, timers,
 * transmit) over every live QP, run either by the NIC thread in a loop
 * (progress=thread, sleeping when idle) or by the application's own calls
 * (progress=caller: ql__sudp_progress from poll, post and
 * ql_device_progress), and the choice between the two (progress=auto).
 * The roles it calls are in req.c, resp.c, comp.c and wire.c (nic_int.h).
 * docs/progress.md is the specification.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "providers/sudp/nic_int.h"

/* ---- the loop ----------------------------------------------------------- */

static bool service_qp(struct sudp_device *dev, struct sudp_qp *qp)
{
	enum ibv_qp_state st = (enum ibv_qp_state)atomic_load(&qp->state);
	bool did = false;

	if (st == IBV_QPS_ERR)
		return ql__sudp_flush(qp, true);
	if (st == IBV_QPS_SQE)
		did = ql__sudp_flush(qp, false);
	if (st < IBV_QPS_RTR)
		return did;
	if (st == IBV_QPS_RTS || st == IBV_QPS_SQD) {
		if (qp->deadline && dev->now >= qp->deadline) {
			ql__sudp_on_timeout(qp);
			did = true;
		}
		did |= ql__sudp_req_tx(qp);
	}
	/* Caller mode: the coalesced ACK waits one round (docs/progress.md
	 * §4): the round that received the request returns first, so the
	 * application sees the data (or the receive completion) without
	 * an ACK's sendmmsg ahead of it, and its reply, posted next, goes
	 * out in one sendmmsg with the ACK behind it. Sixteen requests
	 * unacknowledged do not wait; nor does the NIC thread (there the
	 * application sees the data as it is placed). */
	if (qp->ack_pending &&
	    (!dev->caller || qp->ack_round != dev->round || qp->unacked >= SUDP_ACK_EVERY)) {
		ql__sudp_send_ack_now(qp);
		did = true;
	}
	if (qp->fault)
		did |= ql__sudp_fault_drain(dev, qp->fault);
	return did;
}

/* Anything for the NIC to do without a packet arriving? */
static bool has_work(struct sudp_device *dev)
{
	for (uint32_t i = 0; i < dev->nlive; i++) {
		struct sudp_qp *qp = dev->live[i];
		int st = atomic_load(&qp->state);
		uint64_t pi = atomic_load(&qp->sq_pi);

		if (st == IBV_QPS_ERR && (pi != qp->sq_ci || atomic_load(&qp->rq_pi) != qp->rq_ci))
			return true;
		if (st == IBV_QPS_RTS && qp->sq_tx < pi && !qp->rnr_until)
			return true;
		if (qp->ack_pending)
			return true;
	}
	return false;
}

/* The earliest timer (retransmission, RNR wait, held fault copies). */
static uint64_t next_due(struct sudp_device *dev)
{
	uint64_t due = UINT64_MAX;

	for (uint32_t i = 0; i < dev->nlive; i++) {
		struct sudp_qp *qp = dev->live[i];

		if (qp->deadline && qp->deadline < due)
			due = qp->deadline;
		if (qp->rnr_until && qp->rnr_until < due)
			due = qp->rnr_until;
		if (qp->fault) {
			uint64_t f = ql__roce_fault_next_due(qp->fault);

			if (f < due)
				due = f;
		}
	}
	if (dev->fault) {
		uint64_t f = ql__roce_fault_next_due(dev->fault);

		if (f < due)
			due = f;
	}
	return due;
}

static void nic_sleep(struct sudp_device *dev)
{
	struct pollfd pfd[2] = { { .fd = dev->sock, .events = POLLIN },
				 { .fd = dev->efd, .events = POLLIN } };
	struct timespec ts, *tsp = NULL;
	uint64_t due, now, v;

	sudp_dev_lock(dev);
	atomic_store(&dev->need_wakeup, 1);
	atomic_thread_fence(memory_order_seq_cst);
	if (has_work(dev) || atomic_load(&dev->stop)) {
		atomic_store(&dev->need_wakeup, 0);
		sudp_dev_unlock(dev);
		return;
	}
	due = next_due(dev);
	sudp_dev_unlock(dev);
	now = sudp_now_ns();
	if (due != UINT64_MAX) {
		uint64_t d = due > now ? due - now : 0;

		ts.tv_sec = (time_t)(d / 1000000000ull);
		ts.tv_nsec = (long)(d % 1000000000ull);
		tsp = &ts;
	}
	ppoll(pfd, 2, tsp, NULL);
	if (pfd[1].revents & POLLIN)
		(void)!read(dev->efd, &v, sizeof(v));
	atomic_store(&dev->need_wakeup, 0);
}

/* One round of the NIC, with the NIC flag held: receive one batch, then
 * every live QP's timers and transmit, then the transmit batch out. true
 * when anything moved. */
static bool nic_round(struct sudp_device *dev, bool rx)
{
	bool did = false;

	dev->now = sudp_now_ns();
	dev->round++;
	if (rx)
		did = ql__sudp_rx_batch(dev) > 0;
	for (uint32_t i = 0; i < dev->nlive; i++)
		did |= service_qp(dev, dev->live[i]);
	if (dev->fault)
		did |= ql__sudp_fault_drain(dev, dev->fault);
	ql__sudp_tx_flush(dev);
	return did;
}

void *ql__sudp_nic_main(void *arg)
{
	struct sudp_device *dev = arg;
	uint64_t idle_since = sudp_now_ns();
	cpu_set_t set;

	/* The application may have pinned itself to one CPU before opening
	 * the device; the NIC must not inherit that and compete with the
	 * thread that polls it. Any CPU, or the URI's cpu=N. */
	CPU_ZERO(&set);
	if (dev->cpu >= 0) {
		CPU_SET(dev->cpu, &set);
	} else {
		long n = sysconf(_SC_NPROCESSORS_CONF);

		for (long c = 0; c < n && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &set);
	}
	(void)!pthread_setaffinity_np(pthread_self(), sizeof(set), &set);

	while (!atomic_load_explicit(&dev->stop, memory_order_relaxed)) {
		bool did;

		sudp_dev_lock(dev);
		did = nic_round(dev, true);
		sudp_dev_unlock(dev);

		if (did) {
			idle_since = dev->now;
			continue;
		}
		if (atomic_load_explicit(&dev->want_lock, memory_order_relaxed))
			sched_yield();
		if (dev->poll_mode == SUDP_POLL_BUSY)
			continue;
		if (sudp_now_ns() - idle_since < (uint64_t)dev->idle_us * 1000ull) {
			sched_yield(); /* two cores shared with the application */
			continue;
		}
		nic_sleep(dev);
		idle_since = sudp_now_ns();
	}
	return NULL;
}

/* ---- caller progress ---------------------------------------------------- */

int ql__sudp_progress(struct sudp_device *dev, bool rx)
{
	bool did;

	/* The NIC flag is an ownership flag here, never waited for: one
	 * thread runs the round, the others (and a setup call that wants
	 * the flag) go on without it. */
	if (atomic_load_explicit(&dev->nic_lock, memory_order_relaxed) ||
	    atomic_load_explicit(&dev->want_lock, memory_order_relaxed) ||
	    atomic_exchange_explicit(&dev->nic_lock, 1, memory_order_acquire))
		return 0;
	did = nic_round(dev, rx);
	atomic_store_explicit(&dev->nic_lock, 0, memory_order_release);
	return did;
}
