/* SPDX-License-Identifier: MIT */
/*
 * sdr_ec: sizing for SDR's erasure-coded reliability (QL_SDR_REL_EC).
 *
 * EC messages carry parity packets after their data packets, in the
 * receiver's slot right after the data (docs/sdr.md, "Erasure coding"), so
 * a connection that sends or receives EC messages needs a parity region per
 * slot (struct ql_sdr_config.parity_size) on both ends, and both ends must
 * configure the same code (ec_data, ec_parity). This computes the region
 * for the largest message; the rest of the API is qlink/sdr.h.
 */
#ifndef QLINK_SDR_EC_H
#define QLINK_SDR_EC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Default code: 8 data + 2 parity packets per stripe. */
#define QL_SDR_EC_DATA_DEFAULT 8
#define QL_SDR_EC_PARITY_DEFAULT 2

/* Bytes of parity region a slot needs for messages of up to max_msg_size
 * bytes with k data + m parity packets per stripe (0: the defaults), for
 * any MTU up to 4096: ceil(ceil(max / mtu) / k) * m * mtu at its largest,
 * rounded up to 4096. 0 for k or m out of range (k 1..32, m 1..16). */
uint64_t ql_sdr_ec_parity_size(uint64_t max_msg_size, uint32_t k, uint32_t m);

#ifdef __cplusplus
}
#endif
#endif
