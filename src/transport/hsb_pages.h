/* SPDX-License-Identifier: MIT */
/*
 * The hsb channel's page region, for in-tree modules that need the pages
 * themselves (the CUDA-Q bridge provider hands them to CUDA-Q as its RX
 * ring). Part of the transport module's in-tree interface, not of the
 * public API: libqlink.so does not export it; libqlink.a has it.
 */
#ifndef QL_TRANSPORT_HSB_PAGES_H
#define QL_TRANSPORT_HSB_PAGES_H

#include <stddef.h>
#include <stdint.h>

#include "qlink/channel.h"

/* The page region: page k at *base + k x page_size, *len bytes in all. */
int ql__hsb_channel_pages(struct ql_channel *ch, uint8_t **base, size_t *len);

#endif
