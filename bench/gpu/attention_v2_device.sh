#!/usr/bin/env bash
# One device call for issue 14's attention lever: the tensor-core attention
# with fp16 exp2 and cp.async double buffering (ZV_CUDA_ATTENTION=mma2, the
# default since 2026-12-07) beside the plain one (mma), each in its own
# gpu_embed_bench process, MiniLM and bge-base shapes, plus the encoder tests
# and the default's vectors against PyTorch fp32: encoder_ab_device.sh with
# that variable (its header has the bundle; AB_TESTS, MINILM_BATCHES and
# BGE_BATCHES narrow it, e.g. AB_TESTS='*Pipelined*:*MmaAttention*'
# MINILM_BATCHES=4096 BGE_BATCHES=none for a quick look).
#   There:  ZV_BUNDLE=.device-attn/zv-attn.tar.xz bash bench/gpu/attention_v2_device.sh
#           (carry .device-attn)
AB_VAR=ZV_CUDA_ATTENTION AB_VALUES="mma2 mma" exec bash bench/gpu/encoder_ab_device.sh
