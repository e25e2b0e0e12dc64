/* SPDX-License-Identifier: MIT */
/*
 * soft+udp provider: devices (the URI, the UDP socket, the NIC thread),
 * protection domains, memory regions and CQs. Setup path: locks and
 * allocation are fine here.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "providers/common/devmem.h"
#include "providers/common/nic.h"
#include "providers/common/progress.h"
#include "providers/common/soft_nic.h"
#include "providers/sudp/sudp.h"
#include "qlink/error.h"
#include "qlink/log.h"
#include "util/sock.h"
#include "verbs/registry.h"

static const struct ql_device_ops sudp_device_ops;

const struct ql__nic_limits ql__sudp_limits = {
	.fw_ver = "qlink-soft-udp-1",
	.max_qp = SUDP_MAX_QP,
	.max_qp_wr = SUDP_MAX_QP_WR,
	.max_sge = SUDP_MAX_SGE,
	.max_cqe = SUDP_MAX_CQE,
	.max_mr = SUDP_MAX_MR,
	.max_rd_atomic = SUDP_MAX_RD_ATOMIC,
	.max_msg = SUDP_MAX_MSG,
	.max_inline = SUDP_MAX_INLINE,
};

static struct sudp_device *to_dev(struct ql_device *d)
{
	return (struct sudp_device *)d;
}

void ql__sudp_kick_always(struct sudp_device *d)
{
	uint64_t one = 1;

	(void)!write(d->efd, &one, sizeof(one));
}

void ql__sudp_kick(struct sudp_device *d)
{
	/* pairs with the NIC's store of need_wakeup and its re-check of the
	 * queues before it sleeps */
	atomic_thread_fence(memory_order_seq_cst);
	if (sudp_unlikely(atomic_load_explicit(&d->need_wakeup, memory_order_relaxed)))
		ql__sudp_kick_always(d);
}

/* ---- the URI ------------------------------------------------------------ */

struct sudp_opts {
	enum sudp_poll_mode poll;
	enum ql__progress_mode progress; /* QLINK_PROGRESS, else auto, when absent */
	uint32_t idle_us;
	int cpu;
	enum ibv_mtu mtu;
	enum sudp_peer_port peer_port;
	uint16_t peer_port_n;
	int rcvbuf; /* SO_RCVBUF, bytes */
	char pcap[QL_DEVICE_URI_MAX];
	char fault_q[QL_DEVICE_URI_MAX];
};

/* Our keys out of the query; what is left is fault injection's. */
static int parse_query(const char *uri, const char *q, struct sudp_opts *o)
{
	char buf[QL_DEVICE_URI_MAX], *save = NULL, *kv;
	size_t fl = 0;

	snprintf(buf, sizeof(buf), "%s", q);
	o->fault_q[0] = '\0';
	for (kv = strtok_r(buf, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
		char *v = strchr(kv, '='), *end;
		unsigned long n;

		if (!v)
			goto bad;
		*v++ = '\0';
		if (!strcmp(kv, "poll")) {
			if (!strcmp(v, "busy"))
				o->poll = SUDP_POLL_BUSY;
			else if (!strcmp(v, "adaptive"))
				o->poll = SUDP_POLL_ADAPTIVE;
			else
				goto bad;
		} else if (!strcmp(kv, "progress")) {
			if (ql__progress_parse(v, &o->progress))
				goto bad;
		} else if (!strcmp(kv, "idle_us")) {
			errno = 0;
			n = strtoul(v, &end, 10);
			if (errno || end == v || *end || *v == '-' || n > 10000000)
				goto bad;
			o->idle_us = (uint32_t)n;
		} else if (!strcmp(kv, "rcvbuf")) {
			errno = 0;
			n = strtoul(v, &end, 10);
			if (errno || end == v || *end || *v == '-' || n < 1024 || n > (1ul << 30))
				goto bad;
			o->rcvbuf = (int)n;
		} else if (!strcmp(kv, "pcap")) {
			if (!*v)
				goto bad;
			snprintf(o->pcap, sizeof(o->pcap), "%s", v);
		} else if (!strcmp(kv, "cpu")) {
			errno = 0;
			n = strtoul(v, &end, 10);
			if (errno || end == v || *end || *v == '-' || n >= CPU_SETSIZE)
				goto bad;
			o->cpu = (int)n;
		} else if (!strcmp(kv, "peer_port")) {
			if (!strcmp(v, "any")) {
				o->peer_port = SUDP_PEER_PORT_ANY;
			} else if (!strcmp(v, "same")) {
				o->peer_port = SUDP_PEER_PORT_SAME;
			} else if (!strcmp(v, "rxe")) {
				o->peer_port = SUDP_PEER_PORT_RXE;
			} else {
				errno = 0;
				n = strtoul(v, &end, 10);
				if (errno || end == v || *end || *v == '-' || n == 0 || n > 65535)
					goto bad;
				o->peer_port = SUDP_PEER_PORT_FIXED;
				o->peer_port_n = (uint16_t)n;
			}
		} else if (!strcmp(kv, "mtu")) {
			n = strtoul(v, &end, 10);
			if (*end)
				goto bad;
			switch (n) {
			case 256:
				o->mtu = IBV_MTU_256;
				break;
			case 512:
				o->mtu = IBV_MTU_512;
				break;
			case 1024:
				o->mtu = IBV_MTU_1024;
				break;
			case 2048:
				o->mtu = IBV_MTU_2048;
				break;
			case 4096:
				o->mtu = IBV_MTU_4096;
				break;
			default:
				goto bad;
			}
		} else {
			int w = snprintf(o->fault_q + fl, sizeof(o->fault_q) - fl, "%s%s=%s",
					 fl ? "&" : "", kv, v);

			if (w < 0 || (size_t)w >= sizeof(o->fault_q) - fl)
				goto bad;
			fl += (size_t)w;
		}
	}
	return 0;
bad:
	return ql_error_set(
		-EINVAL,
		"'%s': the query takes progress=thread|caller|auto, poll=busy|adaptive, "
		"idle_us=N, cpu=N, rcvbuf=BYTES, pcap=FILE, "
		"mtu=256|512|1024|2048|4096, peer_port=any|same|rxe|N and the fault options of "
		"docs/soft-udp.md, joined by '&'",
		uri);
}

/* "IP", "IP:PORT", "[IPv6]", "[IPv6]:PORT" */
static int parse_addr(const char *uri, const char *s, size_t n, struct sudp_device *dev)
{
	char host[64];
	const char *port = NULL;
	size_t hl;

	if (n && s[0] == '[') {
		const char *rb = memchr(s, ']', n);

		if (!rb)
			goto bad;
		hl = (size_t)(rb - s - 1);
		if (hl >= sizeof(host))
			goto bad;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		if ((size_t)(rb - s) + 1 < n) {
			if (rb[1] != ':')
				goto bad;
			port = rb + 2;
		}
		dev->family = AF_INET6;
		if (inet_pton(AF_INET6, host, dev->my_ip) != 1)
			goto bad;
	} else {
		const char *c = memchr(s, ':', n);

		hl = c ? (size_t)(c - s) : n;
		if (!hl || hl >= sizeof(host))
			goto bad;
		memcpy(host, s, hl);
		host[hl] = '\0';
		if (c)
			port = c + 1;
		dev->family = AF_INET;
		if (inet_pton(AF_INET, host, dev->my_ip) != 1)
			goto bad;
	}
	dev->port = ROCE_UDP_PORT;
	if (port) {
		char pb[8], *end;
		size_t pl = n - (size_t)(port - s);
		unsigned long v;

		if (!pl || pl >= sizeof(pb))
			goto bad;
		memcpy(pb, port, pl);
		pb[pl] = '\0';
		v = strtoul(pb, &end, 10);
		if (*end || end == pb || v > 65535)
			goto bad;
		dev->port = (uint16_t)v;
	}
	if (dev->family == AF_INET && !memcmp(dev->my_ip, "\0\0\0\0", 4))
		goto bad;
	return 0;
bad:
	return ql_error_set(-EINVAL,
			    "'%s': soft+udp devices are soft+udp://IP[:PORT] or "
			    "soft+udp://[IPv6][:PORT] with a unicast address of this host",
			    uri);
}

/* The largest IB MTU whose packets fit the interface that owns our address
 * (as rxe derives its active MTU from the netdev's): headers are at most
 * IP (40) + UDP (8) + BTH, RETH, ImmDt (32) + ICRC (4). 1024 when unknown
 * (what fits Ethernet's 1500). */
static enum ibv_mtu iface_mtu(const struct sudp_device *dev)
{
	enum ibv_mtu best = IBV_MTU_1024;
	struct ifaddrs *ifa, *i;
	int s, mtu = 0;

	if (getifaddrs(&ifa))
		return best;
	for (i = ifa; i && !mtu; i = i->ifa_next) {
		const uint8_t *a, *m;
		size_t n;
		bool match = true;

		if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != dev->family)
			continue;
		if (dev->family == AF_INET) {
			a = (const uint8_t *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr;
			m = (const uint8_t *)&((struct sockaddr_in *)i->ifa_netmask)->sin_addr;
			n = 4;
		} else {
			a = (const uint8_t *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
			m = (const uint8_t *)&((struct sockaddr_in6 *)i->ifa_netmask)->sin6_addr;
			n = 16;
		}
		for (size_t k = 0; k < n; k++)
			match &= (a[k] & m[k]) == (dev->my_ip[k] & m[k]);
		if (match) {
			struct ifreq r;

			memset(&r, 0, sizeof(r));
			snprintf(r.ifr_name, sizeof(r.ifr_name), "%s", i->ifa_name);
			s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
			if (s >= 0) {
				if (!ioctl(s, SIOCGIFMTU, &r))
					mtu = r.ifr_mtu;
				close(s);
			}
		}
	}
	freeifaddrs(ifa);
	for (int e = IBV_MTU_4096; e >= IBV_MTU_256 && mtu; e--)
		if ((128 << e) + 84 <= mtu)
			return (enum ibv_mtu)e;
	return best;
}

static int open_socket(const char *uri, struct sudp_device *dev, int rcvbuf)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int s, on = 1, pmtu;

	memset(&ss, 0, sizeof(ss));
	if (dev->family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(dev->port);
		memcpy(&a->sin_addr, dev->my_ip, 4);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(dev->port);
		memcpy(&a->sin6_addr, dev->my_ip, 16);
		sl = sizeof(*a);
	}
	s = socket(dev->family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return ql_error_set(-errno, "'%s': socket: %s", uri, strerror(errno));
	/* DF set: no fragments, and IPv4 Identification 0 on an unconnected
	 * socket, which the ICRC covers (docs/soft-udp.md) */
	if (dev->family == AF_INET) {
		pmtu = IP_PMTUDISC_DO;
		setsockopt(s, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	} else {
		pmtu = IPV6_PMTUDISC_DO;
		setsockopt(s, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu));
		setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
	}
	{
		int sz = 4 << 20;

		setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
		setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	}
	/* the kernel's count of the datagrams it dropped here, on each
	 * datagram received after a drop (wire.c, rx_kdrops) */
	setsockopt(s, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof(on));
	if (bind(s, (struct sockaddr *)&ss, sl)) {
		int e = errno;

		close(s);
		return ql_error_set(-e, "'%s': bind to port %u: %s%s", uri, dev->port, strerror(e),
				    e == EADDRINUSE ? " (another device or rdma_rxe owns it)" : "");
	}
	/* port 0: the kernel's pick (a device its peers learn the port of) */
	sl = sizeof(ss);
	if (!getsockname(s, (struct sockaddr *)&ss, &sl))
		dev->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	dev->sock = s;
	return 0;
}

static int sudp_open(const char *uri, const char *scheme, const char *rest, struct ql_device **out)
{
	struct sudp_opts o = { .poll = SUDP_POLL_ADAPTIVE,
			       .progress = ql__progress_default(),
			       .idle_us = 200,
			       .mtu = 0,
			       .rcvbuf = 4 << 20,
			       .cpu = -1 };
	const char *q = strchr(rest, '?');
	struct sudp_device *dev;
	int ret;

	(void)scheme;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->sock = -1;
	dev->efd = -1;
	ret = parse_addr(uri, rest, q ? (size_t)(q - rest) : strlen(rest), dev);
	if (ret)
		goto err;
	if (q) {
		ret = parse_query(uri, q + 1, &o);
		if (ret)
			goto err;
	}
	ret = ql__roce_fault_parse(o.fault_q, false, &dev->fault_cfg);
	if (ret)
		goto err;
	if (ql__roce_fault_cfg_on(&dev->fault_cfg)) {
		dev->fault = calloc(1, sizeof(*dev->fault));
		if (!dev->fault) {
			ret = -ENOMEM;
			goto err;
		}
		ret = ql__roce_fault_init(dev->fault, &dev->fault_cfg);
		if (ret) {
			free(dev->fault);
			dev->fault = NULL;
			goto err;
		}
	}
	if (o.pcap[0]) {
		ret = ql__roce_pcap_open(&dev->pcap, o.pcap);
		if (ret)
			goto err;
	}
	dev->poll_mode = o.poll;
	dev->cpu = o.cpu;
	dev->idle_us = o.idle_us;
	dev->peer_port = o.peer_port;
	dev->peer_port_n = o.peer_port_n;
	ret = open_socket(uri, dev, o.rcvbuf);
	if (ret)
		goto err;
	dev->active_mtu = o.mtu ? o.mtu : iface_mtu(dev);
	dev->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (dev->efd < 0) {
		ret = ql_error_set(-errno, "soft+udp: eventfd: %s", strerror(errno));
		goto err;
	}
	dev->tx = calloc(SUDP_BATCH, sizeof(*dev->tx));
	dev->rx = calloc(SUDP_BATCH, sizeof(*dev->rx));
	if (!dev->tx || !dev->rx) {
		ret = -ENOMEM;
		goto err;
	}
	/* GID index 0: the IPv4-mapped IPv6 address, or the IPv6 address */
	if (dev->family == AF_INET) {
		dev->gid.raw[10] = 0xff;
		dev->gid.raw[11] = 0xff;
		memcpy(&dev->gid.raw[12], dev->my_ip, 4);
	} else {
		memcpy(dev->gid.raw, dev->my_ip, 16);
	}
	{
		char ip[INET6_ADDRSTRLEN] = "";

		inet_ntop(dev->family, dev->my_ip, ip, sizeof(ip));
		snprintf(dev->name, sizeof(dev->name), "%s:%u", ip, dev->port);
	}
	pthread_mutex_init(&dev->setup, NULL);
	dev->next_pd_id = 1;
	ql__nic_random(dev->key_secret, sizeof(dev->key_secret));
	ql__nic_random(dev->mr_epoch, sizeof(dev->mr_epoch));
	ql__nic_random(dev->qp_gen, sizeof(dev->qp_gen));
	dev->base.ops = &sudp_device_ops;
	ql__sudp_rx_init(dev);
	/* auto: the shared rule, one spinning thread more (the NIC's) */
	dev->caller = ql__progress_resolve(o.progress, 1) == QL__PROGRESS_CALLER;
	ret = dev->caller ? 0 : pthread_create(&dev->thread, NULL, ql__sudp_nic_main, dev);
	if (!ret && !dev->caller)
		ql__progress_threads_add(1);
	if (ret) {
		pthread_mutex_destroy(&dev->setup);
		ret = ql_error_set(-ret, "soft+udp: cannot start the NIC thread");
		goto err;
	}
	*out = &dev->base;
	return 0;
err:
	ql__roce_pcap_close(dev->pcap);
	if (dev->sock >= 0)
		close(dev->sock);
	if (dev->efd >= 0)
		close(dev->efd);
	if (dev->fault) {
		ql__roce_fault_fini(dev->fault);
		free(dev->fault);
	}
	free(dev->tx);
	free(dev->rx);
	free(dev);
	return ret;
}

static int sudp_close(struct ql_device *d)
{
	struct sudp_device *dev = to_dev(d);

	if (!dev->caller) {
		atomic_store(&dev->stop, true);
		ql__sudp_kick_always(dev);
		pthread_join(dev->thread, NULL);
		ql__progress_threads_add(-1);
	}
	close(dev->sock);
	close(dev->efd);
	ql__roce_pcap_close(dev->pcap);
	if (dev->fault) {
		ql__roce_fault_fini(dev->fault);
		free(dev->fault);
	}
	pthread_mutex_destroy(&dev->setup);
	free(dev->tx);
	free(dev->rx);
	free(dev);
	return 0;
}

static int sudp_query(struct ql_device *d, struct ql_device_attr *a)
{
	struct sudp_device *dev = to_dev(d);

	ql__nic_query(a, &ql__sudp_limits);
	snprintf(a->name, sizeof(a->name), "%s", dev->name);
	snprintf(a->wire, sizeof(a->wire), "udp");
	a->port.active_mtu = dev->active_mtu;
	a->gid = dev->gid;
	return 0;
}

static void add_fault(struct ql_device_counters *c, const struct roce_fault *f)
{
	if (!f)
		return;
	c->fault_drop += f->count[ROCE_FAULT_DROP];
	c->fault_dup += f->count[ROCE_FAULT_DUP];
	c->fault_reorder += f->count[ROCE_FAULT_REORDER];
	c->fault_delay += f->count[ROCE_FAULT_DELAY];
	c->fault_corrupt += f->count[ROCE_FAULT_CORRUPT];
}

static int sudp_counters(struct ql_device *d, struct ql_device_counters *c)
{
	struct sudp_device *dev = to_dev(d);
	_Atomic uint64_t *v = dev->cnt.v;
	uint32_t kd;

	memset(c, 0, sizeof(*c));
	c->uc_drop_access = atomic_load(&v[SC_UC_DROP_ACCESS]);
	c->uc_drop_no_recv = atomic_load(&v[SC_UC_DROP_NO_RECV]);
	c->uc_drop_not_ready = atomic_load(&v[SC_UC_DROP_NOT_READY]);
	c->rc_nak_access = atomic_load(&v[SC_NAK_ACCESS]);
	c->rc_nak_rnr = atomic_load(&v[SC_NAK_RNR]);
	c->rc_nak_inv_req = atomic_load(&v[SC_NAK_INV_REQ]);
	c->rc_nak_op_err = atomic_load(&v[SC_NAK_OP_ERR]);
	c->rc_nak_seq = atomic_load(&v[SC_NAK_SEQ]);
	c->tx_packets = atomic_load(&v[SC_TX_PKTS]);
	c->rx_packets = atomic_load(&v[SC_RX_PKTS]);
	c->rx_dropped = atomic_load(&v[SC_RX_BAD]) + atomic_load(&v[SC_RX_NO_QP]);
	c->rx_icrc_errors = atomic_load(&v[SC_RX_ICRC]);
	c->retransmits = atomic_load(&v[SC_RETRANSMIT]);
	c->timeouts = atomic_load(&v[SC_TIMEOUT]);
	c->naks_received = atomic_load(&v[SC_NAK_RCVD]);
	c->rnr_naks_received = atomic_load(&v[SC_RNR_RCVD]);
	c->duplicates = atomic_load(&v[SC_DUP]);
	c->uc_msgs_dropped = atomic_load(&v[SC_UC_MSG_DROPPED]);
	/* what the NIC last saw, and any drop since: the kernel reports one
	 * with the next datagram only, so ask it (not on the hot path) */
	c->rx_kernel_drops = atomic_load(&dev->rx_kdrops);
	if (!ql__sock_drops(dev->sock, &kd))
		c->rx_kernel_drops = sudp_kdrops_extend(c->rx_kernel_drops, kd);
	sudp_dev_lock(dev);
	add_fault(c, dev->fault);
	for (uint32_t i = 0; i < dev->nlive; i++)
		add_fault(c, dev->live[i]->fault);
	c->fault_drop += atomic_load(&v[SC_NCOUNTERS]); /* of destroyed QPs */
	sudp_dev_unlock(dev);
	c->uc_drop_injected = c->fault_drop;
	return 0;
}

static int sudp_pd_alloc(struct ql_device *d, struct ql_pd **out)
{
	return ql__nic_pd_alloc(d, &to_dev(d)->setup, &to_dev(d)->next_pd_id, out);
}

static int sudp_pd_free(struct ql_pd *p)
{
	return ql__nic_pd_free(p, &to_dev(p->dev)->setup, "soft+udp");
}

static int sudp_mr_reg_iova(struct ql_pd *p, void *addr, size_t length, uint64_t iova, int access,
			    struct ql_mr **out)
{
	struct ql__nic_pd *pd = (struct ql__nic_pd *)p;
	struct sudp_device *dev = to_dev(p->dev);
	struct sudp_mr_entry *e;
	struct sudp_mr *mr;
	uint32_t idx;
	int ret;

	uint32_t cuda = 0;

	ret = ql__nic_mr_check(length, access, "soft+udp");
	if (!ret) /* GPU device memory: moved by the copy engine (devmem.h) */
		ret = ql__nic_mem_tag(addr, length, "soft+udp", &cuda);
	if (ret)
		return ret;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	pthread_mutex_lock(&dev->setup);
	ret = ql__nic_mr_claim((void **)dev->mrs, SUDP_MAX_MR, dev->mr_epoch, dev->key_secret,
			       SUDP_MR_IDX_BITS, mr, &mr->base, p, addr, length, access, "soft+udp",
			       &idx);
	if (ret) {
		pthread_mutex_unlock(&dev->setup);
		free(mr);
		return ret;
	}
	mr->idx = idx;
	sudp_dev_lock(dev);
	e = &dev->mr[idx];
	e->access = (uint32_t)access;
	e->pd_id = pd->id;
	e->addr = (uint64_t)(uintptr_t)addr;
	e->length = length;
	e->iova = iova;
	e->cuda = cuda;
	e->lkey = mr->base.lkey;
	e->rkey = mr->base.rkey;
	sudp_dev_unlock(dev);
	pthread_mutex_unlock(&dev->setup);
	*out = &mr->base;
	return 0;
}

static int sudp_mr_reg(struct ql_pd *p, void *addr, size_t length, int access, struct ql_mr **out)
{
	return sudp_mr_reg_iova(p, addr, length, (uint64_t)(uintptr_t)addr, access, out);
}

static int sudp_mr_dereg(struct ql_mr *m)
{
	struct sudp_mr *mr = (struct sudp_mr *)m;
	struct sudp_device *dev = to_dev(m->pd->dev);

	pthread_mutex_lock(&dev->setup);
	sudp_dev_lock(dev);
	if (ql__sudp_mr_referenced(dev, m->lkey)) {
		sudp_dev_unlock(dev);
		pthread_mutex_unlock(&dev->setup);
		return ql_error_set(-EBUSY,
				    "soft+udp: MR lkey 0x%x is named by a posted work request",
				    m->lkey);
	}
	/* once this returns the NIC no longer reads or writes the memory */
	memset(&dev->mr[mr->idx], 0, sizeof(dev->mr[mr->idx]));
	sudp_dev_unlock(dev);
	dev->mrs[mr->idx] = NULL;
	((struct ql__nic_pd *)m->pd)->nmr--;
	pthread_mutex_unlock(&dev->setup);
	free(mr);
	return 0;
}

static int sudp_cq_create(struct ql_device *d, int cqe, struct ql_cq **out)
{
	struct sudp_device *dev = to_dev(d);
	struct sudp_cq *cq;
	uint32_t size;

	int ret = ql__nic_cq_check(cqe, SUDP_MAX_CQE);

	if (ret)
		return ret;
	size = ql__nic_pow2_at_least((uint32_t)cqe + SUDP_CQ_SLACK);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->ring = calloc(size, sizeof(*cq->ring));
	if (!cq->ring) {
		free(cq);
		return -ENOMEM;
	}
	cq->base.head.ops = &ql__sudp_cq_ops;
	cq->base.dev = d;
	cq->base.cqe = cqe;
	cq->dev = dev;
	cq->depth = cqe;
	cq->mask = size - 1;
	*out = &cq->base;
	return 0;
}

static int sudp_cq_destroy(struct ql_cq *c)
{
	struct sudp_cq *cq = (struct sudp_cq *)c;
	struct sudp_device *dev = cq->dev;

	pthread_mutex_lock(&dev->setup);
	if (cq->nrefs) {
		pthread_mutex_unlock(&dev->setup);
		return ql_error_set(-EBUSY, "soft+udp: CQ still used by %u QPs", cq->nrefs);
	}
	pthread_mutex_unlock(&dev->setup);
	free(cq->ring);
	free(cq);
	return 0;
}

static int sudp_qp_fault(struct ql_qp *q, const char *spec)
{
	struct sudp_qp *qp = (struct sudp_qp *)q;
	struct sudp_device *dev = qp->dev;
	struct roce_fault_cfg cfg;
	struct roce_fault *f = NULL, *old;
	int ret;

	ret = ql__roce_fault_parse(spec ? spec : "", false, &cfg);
	if (ret)
		return ret;
	if (ql__roce_fault_cfg_on(&cfg)) {
		f = calloc(1, sizeof(*f));
		if (!f)
			return -ENOMEM;
		ret = ql__roce_fault_init(f, &cfg);
		if (ret) {
			free(f);
			return ret;
		}
	}
	sudp_dev_lock(dev);
	old = qp->fault;
	if (old)
		atomic_fetch_add(&dev->cnt.v[SC_NCOUNTERS], old->count[ROCE_FAULT_DROP]);
	qp->fault = f;
	sudp_dev_unlock(dev);
	if (old) {
		/* copies it still held are lost: as on a wire, RC resends */
		ql__roce_fault_fini(old);
		free(old);
	}
	return 0;
}

/* ql_device_progress: the NIC's work in the caller (caller mode only; a
 * NIC thread needs no help) */
static int sudp_progress(struct ql_device *d)
{
	struct sudp_device *dev = to_dev(d);

	return dev->caller ? ql__sudp_progress(dev, true) : 0;
}

static bool sudp_caller(const struct ql_device *d)
{
	return to_dev((struct ql_device *)(uintptr_t)d)->caller;
}

static const struct ql_device_ops sudp_device_ops = {
	.close = sudp_close,
	.query = sudp_query,
	.counters = sudp_counters,
	.pd_alloc = sudp_pd_alloc,
	.pd_free = sudp_pd_free,
	.mr_reg = sudp_mr_reg,
	.mr_reg_iova = sudp_mr_reg_iova,
	.mr_dereg = sudp_mr_dereg,
	.cq_create = sudp_cq_create,
	.cq_destroy = sudp_cq_destroy,
	.qp_create = ql__sudp_qp_create,
	.qp_destroy = ql__sudp_qp_destroy,
	.qp_modify = ql__sudp_qp_modify,
	.qp_query = ql__sudp_qp_query,
	.qp_fault = sudp_qp_fault,
	.progress = sudp_progress,
	.caller = sudp_caller,
};

static int sudp_list(ql_provider_list_cb cb, void *ctx)
{
	/* any local address opens: the template stands for them all */
	return cb(ctx, "soft+udp://IP[:PORT]");
}

static int sudp_mem_alloc(struct ql_pd *pd, size_t length, void **addr)
{
	(void)pd;
	return ql__nic_mem_map(length, "soft+udp", addr);
}

static void sudp_mem_free(struct ql_pd *pd, void *addr, size_t length)
{
	(void)pd;
	munmap(addr, length);
}

const struct ql_provider ql_provider_soft_udp = {
	.name = "soft",
	.schemes = (const char *const[]){ "soft+udp", NULL },
	.open = sudp_open,
	.list = sudp_list,
	.mem_alloc = sudp_mem_alloc,
	.mem_free = sudp_mem_free,
	/* the NIC copies with the CPU: host memory the GPU maps (docs/verbs.md) */
	.gpu_mem = QL_MEM_PATH_HOST_MAPPED,
};
