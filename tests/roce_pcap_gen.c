// SPDX-License-Identifier: MIT
/*
 * roce_pcap_gen: writes a pcap of one RoCEv2 packet per opcode the codec
 * knows (RC and UC), plus each AETH kind (ACK, RNR NAK, the NAK codes),
 * over IPv4 (random Identification, as rdma_rxe sends) and IPv6, built by
 * src/providers/sudp/roce.c and framed by src/providers/sudp/pcap.c. tests/roce_tshark.sh decodes
 * it with tshark.
 *
 *   roce_pcap_gen FILE          prints the number of packets written
 *   roce_pcap_gen --corpus DIR  writes the seed corpus of tests/fuzz/fuzz_roce.c
 *                               instead (its input format, its addresses)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <qlink/error.h>

#include "providers/sudp/pcap.h"
#include "providers/sudp/roce.h"

static const uint8_t opcodes[] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
	0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x16, 0x17, 0x20,
	0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b,
};

static const char *corpus_dir;
static int corpus_n;

/* a fuzz_roce input: mode byte (bit 0: IPv6), then the UDP payload */
static int emit_seed(const struct roce_addr *a, const uint8_t *buf, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/seed-%03d", corpus_dir, corpus_n++);
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	uint8_t mode = a->family == AF_INET6;
	int ok = fwrite(&mode, 1, 1, f) == 1 && fwrite(buf, 1, n, f) == n;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static int emit(struct roce_pcap *pc, struct roce_addr *a, struct roce_pkt *p, uint64_t *ts)
{
	static uint8_t buf[2048];
	int n = ql__roce_build(buf, sizeof(buf), p, a);
	if (n < 0) {
		fprintf(stderr, "roce_pcap_gen: build of opcode 0x%02x: %d\n", p->bth.opcode, n);
		return -1;
	}
	if (corpus_dir)
		return emit_seed(a, buf, (size_t)n);
	struct iovec iov = { buf, (size_t)n };
	*ts += 1000;
	return ql__roce_pcap_write(pc, *ts, a, &iov, 1);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--corpus")) {
		corpus_dir = argv[2];
	} else if (argc != 2) {
		fprintf(stderr, "usage: roce_pcap_gen FILE | --corpus DIR\n");
		return 2;
	}
	struct roce_pcap *pc = NULL;
	if (!corpus_dir && ql__roce_pcap_open(&pc, argv[1])) {
		fprintf(stderr, "roce_pcap_gen: %s\n", ql_error_detail());
		return 1;
	}
	static uint8_t payload[1024];
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7);
	uint64_t ts = 1700000000ull * 1000000000ull;
	int count = 0;
	uint32_t psn = 100;
	srand(7);
	for (int fam = 0; fam < 2; fam++) {
		struct roce_addr a = { .family = fam ? AF_INET6 : AF_INET,
				       .sport = 0xc123,
				       .dport = ROCE_UDP_PORT };
		if (corpus_dir) { /* fuzz_roce.c's addresses, so its ICRC checks pass */
			static const uint8_t f4[2][4] = { { 10, 0, 0, 1 }, { 10, 0, 0, 2 } };
			memcpy(a.src, f4[0], 4);
			memcpy(a.dst, f4[1], 4);
			a.sport = 0xc000;
		} else if (fam) {
			static const uint8_t s6[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0,
							0,    0, 0, 0, 0, 0, 0, 1 };
			static const uint8_t d6[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0,
							0,    0, 0, 0, 0, 0, 0, 2 };
			memcpy(a.src, s6, 16);
			memcpy(a.dst, d6, 16);
		} else {
			static const uint8_t s4[4] = { 10, 0, 0, 1 }, d4[4] = { 10, 0, 0, 2 };
			memcpy(a.src, s4, 4);
			memcpy(a.dst, d4, 4);
		}
		for (size_t i = 0; i < sizeof(opcodes); i++) {
			uint8_t op = opcodes[i];
			uint8_t o = ROCE_OPCODE_OP(op);
			bool not_last = o == ROCE_OP_SEND_FIRST || o == ROCE_OP_SEND_MIDDLE ||
					o == ROCE_OP_RDMA_WRITE_FIRST ||
					o == ROCE_OP_RDMA_WRITE_MIDDLE ||
					o == ROCE_OP_RDMA_READ_RESPONSE_FIRST ||
					o == ROCE_OP_RDMA_READ_RESPONSE_MIDDLE;
			struct roce_pkt p = { 0 };
			p.bth.opcode = op;
			p.bth.pkey = ROCE_DEFAULT_PKEY;
			p.bth.dqpn = 0x11 + (uint32_t)i;
			p.bth.psn = psn++;
			p.bth.ackreq = op == 0x04 || op == 0x0a;
			p.bth.se = op == 0x05;
			p.reth = (struct roce_reth){ 0x7f0000001000ull, 0x1234, 1000 };
			p.aeth = (struct roce_aeth){ ROCE_AETH_ACK(ROCE_AETH_CREDITS_INVALID), 42 };
			p.atomic = (struct roce_atomiceth){ 0x7f0000002000ull, 0x5678, 5, 7 };
			p.atomic_orig = 0x1122334455667788ull;
			p.imm = 0xcafef00d;
			p.inv_rkey = 0x9abc;
			if (ql__roce_opcode_headers(op) & ROCE_HAS_PAYLOAD) {
				p.payload = payload;
				p.payload_len = not_last ? 1024 : 13 + (uint32_t)i;
			}
			a.ip_id = fam ? 0 : (uint16_t)rand();
			if (emit(pc, &a, &p, &ts))
				return 1;
			count++;
		}
		/* every AETH kind on an ACKNOWLEDGE */
		const uint8_t syn[] = { ROCE_AETH_ACK(3),
					ROCE_AETH_RNR_NAK(14),
					ROCE_AETH_NAK(ROCE_NAK_PSN_SEQ_ERROR),
					ROCE_AETH_NAK(ROCE_NAK_INVALID_REQUEST),
					ROCE_AETH_NAK(ROCE_NAK_REMOTE_ACCESS),
					ROCE_AETH_NAK(ROCE_NAK_REMOTE_OP) };
		for (size_t i = 0; i < sizeof(syn); i++) {
			struct roce_pkt p = { 0 };
			p.bth.opcode = ROCE_RC(ROCE_OP_ACKNOWLEDGE);
			p.bth.pkey = ROCE_DEFAULT_PKEY;
			p.bth.dqpn = 0x11;
			p.bth.psn = psn++;
			p.aeth.syndrome = syn[i];
			p.aeth.msn = 7;
			a.ip_id = fam ? 0 : (uint16_t)rand();
			if (emit(pc, &a, &p, &ts))
				return 1;
			count++;
		}
	}
	if (corpus_dir) {
		/* fault-injection queries (mode byte 2; 6: provider keys allowed) */
		static const char *const q[] = {
			"\x02"
			"drop=0.01&dup=0.01&reorder=0.01&delay=0.01&"
			"delay_us=200&corrupt=0.01&seed=7&drop_nth=5",
			"\x06"
			"pcap=/tmp/x.pcap&loss=0.5&drop_once=3&fault_slots=4",
			"\x02"
			"drop=1.5",
			"\x02"
			"reorder_max_us=0&seed=0x10"
		};
		for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/query-%zu", corpus_dir, i);
			FILE *f = fopen(path, "wb");
			if (!f || fwrite(q[i], 1, strlen(q[i]), f) != strlen(q[i]) || fclose(f))
				return 1;
		}
		printf("%d\n", corpus_n);
		return 0;
	}
	if (ql__roce_pcap_close(pc)) {
		fprintf(stderr, "roce_pcap_gen: close failed\n");
		return 1;
	}
	printf("%d\n", count);
	return 0;
}
