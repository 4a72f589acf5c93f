/*
 * The MF kernel compiled for x86-64-v3 (AVX2, FMA), in portable builds only (see
 * kernel.c): CMake gives this file -march=x86-64-v3.
 */
#define STRATA__MF_SGD_NAME strata__mf_sgd_x86v3
#include "apps/mf/kernel_impl.h"
