/* SPDX-License-Identifier: MIT */
/*
 * hsb: the Hololink-compatible data plane (docs/wire-protocol.md, "hsb
 * transport").
 *
 * What FPGAs with NVIDIA's Holoscan Sensor Bridge IP send a host: a UC QP;
 * per frame the board writes the frame's DP_BUFFER_LENGTH bytes into a page
 * of a host region registered at iova 0 (page k at k x page_size) with RDMA
 * WRITE ONLY packets, each with its own RETH, then 128 bytes of metadata
 * with one WRITE ONLY WITH IMMEDIATE at page + round_up(frame_len, 128);
 * the immediate is page | (PSN & 0xFFFFF) << 12 (network order on the
 * wire). The receive completion is the metadata write's: the host takes
 * page = imm & 0xFFF and the frame length it configured (frame_len), never
 * the completion's byte_len. The host keeps a receive WQE per free page
 * posted (and a few more: it re-posts in batches); responses go back by
 * SEND into the QCS's receive buffers, never larger than they are.
 *
 * The channel is a struct ql_channel like the verbs channel, so the same
 * daemon, dispatcher and handlers serve it. The client plays the FPGA's data
 * plane (tests, the VPPU); it takes the host's parameters from a struct
 * ql_hsb_params, filled from the rendezvous text or by the register protocol.
 */
#ifndef QLINK_HSB_H
#define QLINK_HSB_H

#include <stddef.h>
#include <stdint.h>

#include "qlink/channel.h"
#include "qlink/ring.h"
#include "qlink/verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QL_HSB_PAGE_UNIT 128u	       /* FPGA page: page_size and base are multiples */
#define QL_HSB_MAX_PAGES 4096u	       /* DP_MAX_BUFF is 12 bits */
#define QL_HSB_MAX_PAGE_SIZE 65536u    /* qlink's bound (a frame is one RDMA message) */
#define QL_HSB_ADDR_LIMIT (1ull << 39) /* (highest byte address >> 7) fits 32 bits */
#define QL_HSB_DEFAULT_PAGES 64u
#define QL_HSB_DEFAULT_PAGE_SIZE 384u
#define QL_HSB_DEFAULT_RESP_SIZE 256u	 /* the CUDA-Q emulator's receive buffers */
#define QL_HSB_METADATA_SIZE 128u	 /* the metadata write after each frame */
#define QL_HSB_IMM_PAGE_MASK 0xfffu	 /* page = imm & 0xFFF */
#define QL_HSB_IMM_PSN_SHIFT 12		 /* PSN & 0xFFFFF in the upper 20 bits */
#define QL_HSB_DEFAULT_PACKET_SIZE 1408u /* (Ethernet MTU 1500 - 74) / 128 x 128 */
/* The least a frame and a response buffer hold: the 24-byte RPC request
 * and response headers (QL_RPC_HEADER_SIZE, QL_RPC_RESPONSE_SIZE of
 * qlink/rpc_wire.h; tests/test_hsb.c asserts they agree). */
#define QL_HSB_MIN_FRAME 24u
#define QL_HSB_MIN_RESP 24u

/* The immediate of a frame's metadata write, host order. */
static inline uint32_t ql_hsb_imm(uint32_t page, uint32_t psn)
{
	return (page & QL_HSB_IMM_PAGE_MASK) | (psn & 0xfffffu) << QL_HSB_IMM_PSN_SHIFT;
}

/* Where a page's metadata lands: round_up(frame_len, 128). */
static inline uint32_t ql_hsb_metadata_offset(uint32_t frame_len)
{
	return (frame_len + QL_HSB_PAGE_UNIT - 1) / QL_HSB_PAGE_UNIT * QL_HSB_PAGE_UNIT;
}

/* The frame metadata as NVIDIA's host library decodes it (big-endian, the
 * first 48 of the 128 bytes; docs/wire-protocol.md 8.3). The board's word:
 * informative, never used to address or size anything. */
struct ql_hsb_metadata {
	uint32_t flags;		/* bytes 0..3 */
	uint32_t psn;		/* 4..7 */
	uint32_t crc;		/* 8..11: of the frame data (algorithm: 8.3) */
	uint64_t timestamp_s;	/* 12..19: PTP time the frame's first data came in */
	uint32_t timestamp_ns;	/* 20..23 */
	uint64_t bytes_written; /* 24..31 */
	uint16_t frame_number;	/* 34..35 (32..33 reserved) */
	uint64_t metadata_s;	/* 36..43: PTP time the metadata was sent */
	uint32_t metadata_ns;	/* 44..47 */
};
#define QL_HSB_METADATA_USED 48u
void ql_hsb_metadata_decode(const void *p, struct ql_hsb_metadata *m);
/* Writes all 128 bytes (the 80 past the fields zero). */
void ql_hsb_metadata_encode(void *p, const struct ql_hsb_metadata *m);

/* What the QCS is programmed with (the DP_* registers) and what it tells
 * the host back: the host end's QP and region, the page geometry, the frame
 * length, and the size of the QCS's receive buffers. */
struct ql_hsb_params {
	uint32_t qpn;	    /* DP_QP: the host's QP number */
	union ibv_gid gid;  /* the host's GID */
	enum ibv_mtu mtu;   /* path MTU to use */
	uint32_t rkey;	    /* DP_RKEY: the host region's rkey */
	uint64_t page_addr; /* DP_PAGE_LSB/MSB: address of page 0 (0: iova 0) */
	uint32_t page_size; /* DP_PAGE_INC x 128 */
	uint32_t num_pages; /* DP_MAX_BUFF + 1 */
	uint32_t frame_len; /* DP_BUFFER_LENGTH: bytes the QCS writes per frame */
	uint32_t resp_size; /* bytes of each QCS receive buffer (largest response) */
};

/* 0 if the geometry is one a QCS can be programmed with: page_size a
 * multiple of 128 in 256..65536, 1..4096 pages, page_addr a multiple of 128
 * and the region below 2^39, frame_len >= 24 with the frame and its
 * metadata in a page (round_up(frame_len, 128) + 128 <= page_size),
 * resp_size >= 24; -EINVAL (with a detail) otherwise. */
int ql_hsb_params_check(const struct ql_hsb_params *p);
/* Text form, one line: "qpn=0x.. gid=... mtu=4096 rkey=0x.. page_addr=0x0
 * page_size=384 pages=64 frame_len=256 resp_size=256". Returns the length
 * written (like snprintf) or a negative errno. */
int ql_hsb_params_format(const struct ql_hsb_params *p, char *buf, size_t len);
/* Parse that form (keys in any order; unknown keys are -EINVAL); checks it. */
int ql_hsb_params_parse(const char *text, struct ql_hsb_params *p);
/* The same parameters as struct ql_conn_params (what the control plane's
 * CONNECTION_PARAMS carries): vaddr = page_addr, length = the region,
 * num_slots/slot_size = the pages, frame_len, resp_size. from_conn checks. */
void ql_hsb_params_to_conn(const struct ql_hsb_params *p, struct ql_conn_params *c);
int ql_hsb_params_from_conn(const struct ql_conn_params *c, struct ql_hsb_params *p);

/* ---- the channel: the host side ----------------------------------------- */

struct ql_hsb_channel_config {
	uint32_t num_pages;    /* 1..4096 (0: 64) */
	uint32_t page_size;    /* multiple of 128, 128..65536 (0: 384) */
	uint32_t frame_len;    /* what the QCS is told to write (DP_BUFFER_LENGTH;
				  0: page_size - 128, the largest that leaves
				  the metadata room) */
	uint32_t resp_size;    /* the QCS's receive buffer size, >= 24 (0: 256):
				  no response is larger */
	uint32_t tx_buffers;   /* response buffers (0: num_pages) */
	uint32_t signal_every; /* signal one SEND in n (0: 16) */
};

/* Pages (ql_pd_mem_alloc'd, registered at iova 0 for REMOTE_WRITE), a UC
 * QP with num_pages + 15 receive WQEs (given-back WQEs are re-posted in
 * batches of up to 16; the extra 15 keep one posted per free page whatever
 * is held back), its CQs and the response pool. */
int ql_hsb_channel_create(struct ql_device *dev, const struct ql_hsb_channel_config *cfg,
			  struct ql_channel **ch);
/* What the QCS is programmed with. */
int ql_hsb_channel_local_params(struct ql_channel *ch, struct ql_hsb_params *p);
/* Connect the UC QP to the QCS's (qpn, gid, mtu of `qcs`; PSN 0). */
int ql_hsb_channel_connect(struct ql_channel *ch, const struct ql_conn_params *qcs,
			   const struct ql_qp_connect_opts *opts);

/* Frames the channel refused before the RPC layer saw them (the receive
 * WQE is re-posted at once, nothing is answered), by reason. */
struct ql_hsb_channel_stats {
	uint64_t frames;       /* receive completions handed on as requests */
	uint64_t bad_imm;      /* page (imm & 0xFFF) >= num_pages */
	uint64_t bad_len;      /* the immediate write's byte_len > page_size */
	uint64_t page_busy;    /* a page written again before it was answered */
	uint64_t recv_errors;  /* receive completions in error */
	uint64_t resp_too_big; /* responses longer than resp_size (never sent) */
	uint64_t not_imm;      /* a completion without an immediate (a SEND) */
};
int ql_hsb_channel_stats(struct ql_channel *ch, struct ql_hsb_channel_stats *s);

/* What came with a frame the channel handed on (buf, still held): its
 * page, the PSN of its immediate and the metadata at page +
 * round_up(frame_len, 128), decoded (what a QCS that writes none, as
 * CUDA-Q's emulator, left there: zeros or an older frame's). */
struct ql_hsb_frame_info {
	uint32_t page;
	uint32_t psn; /* imm >> 12 */
	struct ql_hsb_metadata md;
};
int ql_hsb_channel_frame_info(struct ql_channel *ch, const struct ql_buffer *buf,
			      struct ql_hsb_frame_info *fi);

/* ---- the client: the FPGA's data plane ---------------------------------- */

/* A ql_client of the hsb transport (qlink/client.h: ql_client_from_hsb). */

struct ql_hsb_client;

struct ql_hsb_client_config {
	uint32_t recv_buffers; /* receive buffers posted for responses (0: 64);
				  released ones are re-posted in batches of up
				  to 16, so 15 or more extra buffers exist */
	uint32_t recv_size;    /* bytes each (0: 256); the host's resp_size */
	uint32_t window;       /* frames in flight at most (0: the host's pages) */
	uint32_t packet_size;  /* frame bytes per WRITE ONLY packet, a multiple
				  of 128 (0: 1408, DP_PACKET_SIZE of a 1500-byte
				  Ethernet MTU); at most the path MTU */
};

int ql_hsb_client_create(struct ql_device *dev, const struct ql_hsb_client_config *cfg,
			 struct ql_hsb_client **cl);
void ql_hsb_client_destroy(struct ql_hsb_client *cl);
/* The client's qpn, gid, mtu (what the host connects to). */
int ql_hsb_client_local_params(struct ql_hsb_client *cl, struct ql_conn_params *p);
/* Program the client with the host's parameters and connect its UC QP. */
int ql_hsb_client_connect(struct ql_hsb_client *cl, const struct ql_hsb_params *host,
			  const struct ql_qp_connect_opts *opts);

/* Send one frame (RPCHeader | args, `len` bytes, zero-padded to the host's
 * frame_len) into the next page (page = frame count mod num_pages) as a
 * board does: WRITE ONLY per packet_size bytes, then the 128-byte metadata
 * (frame number, CLOCK_REALTIME timestamps) by WRITE WITH IMMEDIATE at
 * page + round_up(frame_len, 128), immediate = ql_hsb_imm(page, its PSN);
 * PSNs count from 0 at connect. -EAGAIN when the window is full, -EMSGSIZE
 * above frame_len, -EIO when the QP failed. */
int ql_hsb_client_send(struct ql_hsb_client *cl, const void *msg, uint32_t len);
/* Tests: write `len` bytes (up to two pages) at byte `offset` of the host
 * region with immediate `imm` (host order; sent in network order), outside
 * the window; waits until the WRITE completed locally. */
int ql_hsb_client_send_raw(struct ql_hsb_client *cl, uint64_t offset, uint32_t imm, const void *msg,
			   uint32_t len);
/* Tests: the same as a plain RDMA WRITE (no immediate, no completion at
 * the host). */
int ql_hsb_client_write_raw(struct ql_hsb_client *cl, uint64_t offset, const void *msg,
			    uint32_t len);
/* The PSN the next packet leaves with (0 after connect). */
uint32_t ql_hsb_client_next_psn(const struct ql_hsb_client *cl);
/* Up to `max` responses in arrival order (0: none); release each, once:
 * ql_hsb_client_release refuses (-EINVAL) a response not polled out or
 * released already. */
int ql_hsb_client_poll(struct ql_hsb_client *cl, struct ql_ring_response *out, int max);
int ql_hsb_client_release(struct ql_hsb_client *cl, const struct ql_ring_response *r);
uint32_t ql_hsb_client_in_flight(const struct ql_hsb_client *cl);
/* Forget frames in flight (a frame the host dropped is never answered). */
void ql_hsb_client_forget(struct ql_hsb_client *cl, uint32_t n);
/* The largest frame: the host's frame_len. */
uint32_t ql_hsb_client_max_msg(const struct ql_hsb_client *cl);

#ifdef __cplusplus
}
#endif
#endif
