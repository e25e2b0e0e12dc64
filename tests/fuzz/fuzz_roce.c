// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the RoCEv2 codec (src/providers/sudp/roce.c) as a hostile peer
 * sees it: any UDP payload through ql__roce_parse, ql__roce_icrc_check and
 * ql__roce_icrc_solve_id, and any query through ql__roce_fault_parse. Checked
 * guarantees: no crash or sanitizer report; a packet that parses rebuilds
 * (ql__roce_build) to one that parses to the same fields; a payload lies inside
 * the input; an IPv4 ICRC accepted with the solved ID is exactly the ICRC the
 * codec computes for that ID.
 *
 * Input: byte 0 picks the family (bit 0) and whether the rest is a fault
 * query (bit 1); the rest is the UDP payload (or the query).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "providers/sudp/fault.h"
#include "providers/sudp/roce.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_same(const struct roce_pkt *a, const struct roce_pkt *b)
{
	if (a->bth.opcode != b->bth.opcode || a->bth.se != b->bth.se || a->bth.mig != b->bth.mig ||
	    a->bth.pad != b->bth.pad || a->bth.pkey != b->bth.pkey || a->bth.fecn != b->bth.fecn ||
	    a->bth.becn != b->bth.becn || a->bth.dqpn != b->bth.dqpn ||
	    a->bth.ackreq != b->bth.ackreq || a->bth.psn != b->bth.psn || a->has != b->has ||
	    a->payload_len != b->payload_len || memcmp(a->payload, b->payload, a->payload_len))
		abort();
	if ((a->has & ROCE_HAS_RETH) && (a->reth.va != b->reth.va || a->reth.rkey != b->reth.rkey ||
					 a->reth.dma_len != b->reth.dma_len))
		abort();
	if ((a->has & ROCE_HAS_AETH) &&
	    (a->aeth.syndrome != b->aeth.syndrome || a->aeth.msn != b->aeth.msn))
		abort();
	if ((a->has & ROCE_HAS_ATOMICETH) &&
	    (a->atomic.va != b->atomic.va || a->atomic.rkey != b->atomic.rkey ||
	     a->atomic.swap_add != b->atomic.swap_add || a->atomic.compare != b->atomic.compare))
		abort();
	if ((a->has & ROCE_HAS_ATOMICACKETH) && a->atomic_orig != b->atomic_orig)
		abort();
	if ((a->has & ROCE_HAS_IMMDT) && a->imm != b->imm)
		abort();
	if ((a->has & ROCE_HAS_IETH) && a->inv_rkey != b->inv_rkey)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t re[70000];
	if (!size)
		return 0;
	uint8_t mode = data[0];
	data++;
	size--;
	if (mode & 2) {
		char *q = malloc(size + 1);
		if (!q)
			return 0;
		memcpy(q, data, size);
		q[size] = 0;
		struct roce_fault_cfg cfg;
		if (ql__roce_fault_parse(q, mode & 4, &cfg) == 0) {
			double sum = 0;
			for (int k = 0; k < ROCE_FAULT_NKINDS; k++) {
				if (!(cfg.rate[k] >= 0 && cfg.rate[k] <= 1))
					abort();
				sum += cfg.rate[k];
			}
			if (sum > 1 + 1e-9)
				abort();
		}
		free(q);
		return 0;
	}
	struct roce_addr a = { .family = (mode & 1) ? AF_INET6 : AF_INET,
			       .src = { 10, 0, 0, 1 },
			       .dst = { 10, 0, 0, 2 },
			       .sport = 0xc000,
			       .dport = ROCE_UDP_PORT };
	uint16_t id;
	if (ql__roce_icrc_solve_id(data, size, &a, &id) == 0) {
		if (ql__roce_icrc_check(data, size, &a))
			abort();
		if (a.family == AF_INET) {
			a.ip_id = id;
			struct iovec iov = { (void *)data, size - ROCE_ICRC_LEN };
			uint32_t c = ql__roce_icrc_iov(&a, &iov, 1);
			const uint8_t *w = data + size - 4;
			if (c != ((uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 |
				  (uint32_t)w[3] << 24))
				abort();
		}
	}
	struct roce_pkt p, q;
	if (ql__roce_parse(data, size, &p))
		return 0;
	if (p.payload < data || p.payload + p.payload_len > data + size)
		abort();
	int n = ql__roce_build(re, sizeof(re), &p, &a);
	if (n < 0)
		abort(); /* whatever parses must build */
	if (ql__roce_parse(re, (size_t)n, &q) || ql__roce_icrc_check(re, (size_t)n, &a))
		abort();
	check_same(&p, &q);
	return 0;
}
