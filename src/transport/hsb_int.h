/* SPDX-License-Identifier: MIT */
/*
 * hsb channel internals, private to the transport module. What other
 * modules may use (the page region) is in transport/hsb_pages.h.
 */
#ifndef QL_TRANSPORT_HSB_INT_H
#define QL_TRANSPORT_HSB_INT_H

#include "transport/hsb_pages.h"

#endif
