// SPDX-License-Identifier: MIT
// The pool's parts compiled as one translation unit (as mimalloc's static.c does), so that the
// compiler inlines across them on the hot path as it did when they were one file
// (bench/pair_instructions.py counts it). Each part stays a file of its own, one noun a file.
#include "pool/block_store.cpp"
#include "pool/caching_policy.cpp"
#include "pool/device_pool.cpp"
#include "pool/expandable_blocks.cpp"
#include "pool/passthrough_pool.cpp"
#include "pool/pending_frees.cpp"
#include "pool/plain_segments.cpp"
