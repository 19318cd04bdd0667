#!/usr/bin/env bash
# The GPU session's runs, in parts that each fit one 10-minute device call:
#   bash benchmarks/run_gpu.sh tests     # pytest -m gpu + per-kernel benchmark
#   bash benchmarks/run_gpu.sh tests1    # half of pytest -m gpu (static CUDA graphs, decode GEMV) that fits one call
#   bash benchmarks/run_gpu.sh all_tests # (session 58) all of pytest -m gpu and tests/kernels on CUDA, xdist, one call
#   bash benchmarks/run_gpu.sh tests2    # the other half, and the kernel tests on CUDA
#   bash benchmarks/run_gpu.sh decode    # llama-1b decode step, eager vs stock vs ours (+CUDA graphs)
#   bash benchmarks/run_gpu.sh prefill   # llama-1b prefill 512/2048
#   bash benchmarks/run_gpu.sh profile   # per-kernel time of one decode step, stock vs ours
#   bash benchmarks/run_gpu.sh gemv      # decode GEMV kernels vs cuBLAS / Inductor, llama-1b and -8b shapes
#   bash benchmarks/run_gpu.sh kernels   # prefill attention / packed QKV and decode attention, ours vs Inductor
#   bash benchmarks/run_gpu.sh decode8b  # llama-8b-shaped decode step, stock vs ours (CUDA graphs)
#   bash benchmarks/run_gpu.sh prefill_cg  # llama-1b prefill 512/2048 at batch 1 and 8 with CUDA graphs
#   bash benchmarks/run_gpu.sh prefill8b   # llama-8b-shaped prefill 2048, batch 1
#   bash benchmarks/run_gpu.sh prefill_b8  # llama-1b prefill 512/2048 at batch 8 without CUDA graphs
#   bash benchmarks/run_gpu.sh persist [model]  # the persistent GEMV form's configs vs the table's (session 17)
#   bash benchmarks/run_gpu.sh prefill_host  # 1B prefill 512 x 1 without graphs: time, host share, host functions
#   bash benchmarks/run_gpu.sh host_ops  # host time per call of the prefill's ops and models, stock vs ours
#   bash benchmarks/run_gpu.sh paired_prefill  # prefill rows within noise of stock, timed in alternating rounds
#   bash benchmarks/run_gpu.sh paired_parts  # 1B 512 x 1 prefill: ours without each family, paired
#   bash benchmarks/run_gpu.sh paired_nopack_cg  # 1B 512 prefill with CUDA graphs: ours with / without the packing
#   bash benchmarks/run_gpu.sh paired_nopack  # 1B 512 prefill, no graphs: ours with / without the packing; op times
#   bash benchmarks/run_gpu.sh profile_prefill  # 1B 512 x 1 prefill's kernels, eager vs sdpa attention, graphed
#   bash benchmarks/run_gpu.sh sdpa_forms [model]  # prefill attention: the SDPA forms x backends, per shape
#   bash benchmarks/run_gpu.sh sdpa_prefill [model]  # HF sdpa attention's prompt rewritten (is_causal + GQA): its GPU
#                                                    # tests, then prefill paired: stock vs ours vs ours without it
#   bash benchmarks/run_gpu.sh sdpa_prefill_rest  # what session 23's budget cut: 1B 2048 x 8, and 512 / 2048 x 1
#                                                 # with CUDA graphs, paired as above
#   bash benchmarks/run_gpu.sh sdpa_prefill8b     # the same at the 8B shape, 512 / 2048 x 1 (no graphs)
#   bash benchmarks/run_gpu.sh padded    # (session 24) SDPA with GQA + a kept mask (cuDNN): its GPU tests, then 1B
#                                        # prompts of unequal length (attention_mask) x 8, paired: stock vs ours vs
#                                        # ours without the attention pass
#   bash benchmarks/run_gpu.sh constdims [model]  # persistent q/k/v configs: the previous commit's kernel vs this one
#   bash benchmarks/run_gpu.sh s26       # after constdims: decode_gemv GPU tests, the chain before / after, 1B decode
#   bash benchmarks/run_gpu.sh kvsweep [model]  # every persistent config of the cache-writing q/k/v, checked, timed
#   bash benchmarks/run_gpu.sh s26_final  # the chain per linear and the 8B decode step with the final table
#   bash benchmarks/run_gpu.sh s27 [model]  # persistent q/k/v and gate/up configs: two row sums vs one joined sum
#   bash benchmarks/run_gpu.sh s27_tests  # decode_gemv GPU tests and the GEMV kernel's CUDA tests, side by side
#   bash benchmarks/run_gpu.sh s28       # RoPE's cos / sin requested before the reduction vs after (a705767's kernel)
#   bash benchmarks/run_gpu.sh s28b      # the block after next requested into L2 (b881331's PREFETCH 2) vs not
#   bash benchmarks/run_gpu.sh s28c      # each block's columns carried from its load to its epilogue vs recomputed
#   bash benchmarks/run_gpu.sh smem      # (f884712's kernel) persistent blocks staged in shared memory vs in registers
#   bash benchmarks/run_gpu.sh mma       # (session 30) bare M = 1 GEMVs on the tensor cores vs the persistent form
#   bash benchmarks/run_gpu.sh batched [model] [batches...]  # (session 30) decode of several sequences at once (M =
#                                        # batch rows per linear), CUDA graphs: stock vs ours (trees, graphed step)
#   bash benchmarks/run_gpu.sh packdecode  # (session 30) batched decode: decode-sized q/k/v and gate/up that cuBLAS runs,
#                                          # packed or not (FUSION_PASSES_QKV_PACKING_DECODE), 8B x 8 and 1B x 4, 16
#   bash benchmarks/run_gpu.sh packdecode_paired  # (session 30) the same after the default changed: ours (2-16 rows
#                                          # packed) vs ours with them unpacked, in alternating rounds
#   bash benchmarks/run_gpu.sh s31_verify  # (session 31) the graphed step after another compile packs its weights (GPU
#                                          # test), then packdecode_paired's 1B half (the run that crashed before the fix)
#   bash benchmarks/run_gpu.sh s64       # (session 64) H200 only: headline's decode steps and chain; s64_gemv: each GEMV
#   bash benchmarks/run_gpu.sh headline  # (session 35) 1B and 8B decode: eager, stock, ours; the chain per linear
#   bash benchmarks/run_gpu.sh s36       # (session 36) HF generate over DynamicCache, forward compiled: eager, stock,
#                                        # ours; Qwen2-shape 512 x 1 prefill paired: stock, ours, ours without packing
#   bash benchmarks/run_gpu.sh compile   # (session 36) first-call compile time, stock vs ours, where it goes (cProfile)
#   bash benchmarks/run_gpu.sh s37       # (session 37) the access-memo GPU test; first-call compile time with fresh
#                                        # caches: 1B decode stock, ours, ours without the memo; 8B decode stock, ours
#   bash benchmarks/run_gpu.sh peers     # (session 38) peers on the same HF model code, 1B: decode (both attentions)
#                                        # and a 512 x 1 prompt: uncompiled, stock, stock with freezing (Inductor's
#                                        # own passes), Liger-Kernel uncompiled and compiled, ours; needs Liger's
#                                        # wheel in .peers/ (the machine has no index: pip download liger-kernel)
#   bash benchmarks/run_gpu.sh peers8b   # (session 39) the same peers at the 8B shape, decode with sdpa attention
#   bash benchmarks/run_gpu.sh peers8b_prefill  # (session 39) ... and a 512 x 1 prompt at the 8B shape
#   bash benchmarks/run_gpu.sh s28_steps # the final kernel's graphed decode steps, 1B and 8B: stock vs ours
#   bash benchmarks/run_gpu.sh s27_step  # after s27: decode_gemv GPU tests, the chain before / after (twice), 1B step
#   bash benchmarks/run_gpu.sh regcap    # the persistent configs' register cap: 1B step, chain before / after
#   bash benchmarks/run_gpu.sh ncu [model]  # Nsight Compute counters (DRAM throughput, occupancy, stall reasons) of the
#                                           decode GEMVs and of a kernel that only reads the same weights
#   bash benchmarks/run_gpu.sh l2next    # (session 33, commit 3df03d5) each chain GEMV requesting the next one's weights
#                                        # into L2 by TMA bulk prefetch vs as shipped
#   bash benchmarks/run_gpu.sh earlyloads  # (session 34, commit 188a3a8) the persistent loop's loads kept ahead of its
#                                          # dot: its tests on CUDA, the chain vs shipped, the decode_gemv GPU tests
#   bash benchmarks/run_gpu.sh earlyloads_configs  # (session 34, commit 188a3a8) its persistent configs vs shipped
#   bash benchmarks/run_gpu.sh pdl [shapes]  # (session 45) GEMVs loading their weights before griddepcontrol.wait
#                                        # (PDL) vs plain launches, shipped and read floors (probe_pdl_preload.py)
#   bash benchmarks/run_gpu.sh s46_tests [shapes]  # (session 46) PDL launches: their GPU tests, then the 1B shipped GEMVs
#                                        # with / without PDL per linear and per layer (probe_pdl_preload --shipped-only)
#   bash benchmarks/run_gpu.sh s46_all   # (session 46) one call: the key PDL GPU tests, 1B decode, 1B GEMVs +/- PDL
#   bash benchmarks/run_gpu.sh s46_decode  # (session 46) 1B and 8B decode: uncompiled, stock, ours without / with PDL
#   bash benchmarks/run_gpu.sh s47       # (session 47) DeBERTa GPU test, shipped GEMVs +/- PDL (one / two blocks
#                                          before the wait), 1B decode +/- PDL, the H200's table on any GPU
#   bash benchmarks/run_gpu.sh s47b      # (session 47) DeBERTa GPU test; the shipped GEMVs' variants and differences
#   bash benchmarks/run_gpu.sh s47c      # (session 47) the PDL twins on CUDA (two blocks preloaded) and DeBERTa
#   bash benchmarks/run_gpu.sh chain     # the decode step's GEMVs back to back (weights from HBM), cuBLAS vs ours
#                                          vs a kernel that only reads the same weights
#   bash benchmarks/run_gpu.sh design    # bare M = 1 GEMV designs (norm prologue or not) vs the read floor
#   bash benchmarks/run_gpu.sh overhead  # a decode step's host time vs GPU-busy time, stock vs ours
#   bash benchmarks/run_gpu.sh decode_rope  # llama-1b decode: stock vs ours (RoPE epilogue on, the default) vs ours without it
#   bash benchmarks/run_gpu.sh prefill8b_cg sdpa|eager  # llama-8b prefill 512/2048 at batch 1 and 8 with CUDA graphs
#   bash benchmarks/run_gpu.sh decode8b_eager  # llama-8b decode: the uncompiled eager model, both attentions
#   bash benchmarks/run_gpu.sh decode_nocg  # llama-1b and -8b decode without CUDA graphs: stock vs ours
#   bash benchmarks/run_gpu.sh prefill8b_rest sdpa|eager  # llama-8b prefill 512/2048 at batch 1 and 8
#   bash benchmarks/run_gpu.sh decode_nocg8b eager|sdpa   # llama-8b decode without CUDA graphs, one attention
#   bash benchmarks/run_gpu.sh inline_tests  # the decode attention kernel traced into Inductor's code: GPU tests
#   bash benchmarks/run_gpu.sh inline        # ... and decode, 1B and 8B: extern vs inline, with and without graphs
#   bash benchmarks/run_gpu.sh kv_tests      # the KV-cache update in the q/k/v GEMV: GPU tests (+ the GEMV kernel tests)
#   bash benchmarks/run_gpu.sh kv [llama-1b|llama-8b] [eager|sdpa]  # ... and decode with CUDA graphs: stock vs ours vs +kv
#   bash benchmarks/run_gpu.sh kv_bench      # the q/k/v GEMV with / without the cache stores, per kernel config
#   bash benchmarks/run_gpu.sh combo         # 1B decode: Inductor's combo kernels (many tiny kernels -> fewer launches)
#   bash benchmarks/run_gpu.sh code [eager|sdpa]  # Inductor's kernels for one 1B decode step and the nodes each computes
#   bash benchmarks/run_gpu.sh profile_kv    # per-kernel profile of the 1B decode step, ours vs ours+kv
#   bash benchmarks/run_gpu.sh configs [llama-1b|llama-8b]  # every M = 1 GEMV config per linear, weights from HBM
#                                 # (under a setting: FUSION_PASSES_GEMV_NORM=late bash ...; the JSON records it)
#   bash benchmarks/run_gpu.sh generate [model] [attn]  # greedy generation: HF generate variants vs the graphed loop
#   bash benchmarks/run_gpu.sh graphs [model] [attn]  # decode: stock vs ours under trees, static graphs, graphed step
#   bash benchmarks/run_gpu.sh final [model] [attn] [variants...]  # decode with CUDA graphs: stock vs ours vs ours
#                                 # without the KV write (the shipped defaults)
#   bash benchmarks/run_gpu.sh table [llama-1b|llama-8b] [eager sdpa]  # decode: stock vs ours as shipped before the
#                                 # GEMV table and state_updates vs ours now vs ours + kv (CUDA graphs)
#   bash benchmarks/run_gpu.sh kernel_tests  # tests/kernels on CUDA (one config per launch, every autotuner config once)
#   bash benchmarks/run_gpu.sh normlate [model]  # the GEMVs' late-norm form: chain and decode step, exact vs late
#   bash benchmarks/run_gpu.sh s60       # (session 60) the late norm in the persistent / PDL form: GEMV kernel tests,
#                                        # the shipped GEMVs and the step's q/k/v, exact vs late
#   bash benchmarks/run_gpu.sh s61       # (session 61) greedy parity, 64 tokens, 1B: ours exact vs late norm
#   bash benchmarks/run_gpu.sh qwen2 [eager|sdpa]  # Qwen2.5-1.5B-shaped decode (q/k/v biases in the GEMV): stock vs ours
#   bash benchmarks/run_gpu.sh arch <model> [eager|sdpa]  # the same for another bench_e2e model (gemma-2b: GeGLU)
#   bash benchmarks/run_gpu.sh validate1  # session 13's changes, part 1 (one call): tests/kernels and the static-graph
#                                           + decode GEMV GPU tests side by side, then the 1B late-norm comparison
#   bash benchmarks/run_gpu.sh validate2  # part 2: the other GPU tests beside HF generate (static-graph fix), then
#                                           the Qwen2 and Gemma decode steps
#   bash benchmarks/run_gpu.sh validate4  # session 14's pad_mm undo and L2 prefetch: their GPU tests and the attention
#                                           kernel's CUDA tests, then the 1B graphed step with / without the prefetch
#   bash benchmarks/run_gpu.sh validate5  # every M = 1 config for Gemma's q/k/v+cache, gate/up, lm_head, Qwen2's q/k/v+cache
#   bash benchmarks/run_gpu.sh l2pf [model]  # decode with the attention kernel requesting the o-proj weight into L2
#                                            (FUSION_PASSES_DECODE_ATTENTION_PREFETCH=on) vs without, side by side
#   bash benchmarks/run_gpu.sh validate3  # session 14's leftovers (one call): Gemma/Qwen2 gate/up and lm_head, ours vs
#                                           cuBLAS; the 1B/8B chain with the q/k/v GEMV as the step launches it; the
#                                           L2-prefetch probe; Gemma's decode step autotuned in place vs the table
# On a machine with two GPUs, two parts can run at once: CUDA_VISIBLE_DEVICES=1 bash benchmarks/run_gpu.sh ...
# Results land in $OUT (the device tool brings them back) and are then copied to benchmarks/results/.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-benchmarks/results}
# SKIP_INSTALL=1 when two parts run at once after one install, so two pips do not race on the same egg-link.
[ -n "${SKIP_INSTALL:-}" ] || python3 -m pip install --no-deps --no-build-isolation -e . -q 2>&1 | grep -v WARNING
# Kernels compared in one call: "new" and "table" import this tree's fusion_passes, any other name V the copy of
# another commit's package in benchmarks/_V (untracked; benchmarks/_old: the previous commit's).
# Lines dynamo's weak-key dictionaries print at interpreter exit (KeyError in _remove_id), kept out of the tables.
EXIT_NOISE='Warning|^Exception ignored|^Traceback|^  File "|^KeyError'
pythonpath() { case "$1" in new|table) echo . ;; *) echo "benchmarks/_$1:." ;; esac; }

# decode_step_new_old TAG LIMIT BUDGET: the graphed 1B decode step (eager attention, stock beside it) with this tree,
# then with the previous commit's package in benchmarks/_old, each within LIMIT s (bench_e2e's budget BUDGET s), into
# e2e_decode_TAG_{new,old}.json
decode_step_new_old() {
  local tag=$1 limit=$2 budget=$3 ver
  for ver in new old; do
    PYTHONPATH=$(pythonpath $ver) timeout "$limit" python3 benchmarks/bench_e2e.py --model llama-1b --attn eager \
      --workloads decode-1024 --variants stock+cudagraphs fusion_passes+graphstep --budget-s "$budget" \
      --out "$OUT/e2e_decode_${tag}_${ver}.json" 2>&1 | grep -v Warning | tail -3
  done
}

headline_runs() {  # 1B and 8B decode steps (uncompiled, stock with CUDA graphs, ours graphed; eager attention), the chain
  local tag=$1 spec model limit budget
  for spec in llama-1b:190:150 llama-8b:250:200; do  # model:time limit:benchmark budget (s)
    IFS=: read -r model limit budget <<< "$spec"
    timeout "$limit" python3 benchmarks/bench_e2e.py --model "$model" --attn eager --workloads decode-1024 \
      --variants eager stock+cudagraphs fusion_passes+graphstep --budget-s "$budget" \
      --out "$OUT/e2e_decode_${tag}_${model}_eager.json" 2>&1 | grep -v Warning | tail -6
  done
  timeout 120 python3 benchmarks/bench_gemv_chain.py --rows 1 --variants cublas ours read \
    --out "$OUT/gemv_chain_${tag}.json" 2>&1 | grep -v Warn | tail -16
}

# shipped_pdl_gemvs TAG ARGS...: each shipped GEMV with PDL and plain, then the q/k/v in the step's form (the cache
# write), 1B and 8B (probe_pdl_preload.py ... ARGS) into pdl_shipped_TAG.json and pdl_qkv_kv_TAG.json
shipped_pdl_gemvs() {
  local tag=$1
  shift
  timeout 150 python3 benchmarks/probe_pdl_preload.py --shipped-only --shapes 1b 8b "$@" \
    --out "$OUT/pdl_shipped_$tag.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -16
  timeout 120 python3 benchmarks/probe_pdl_preload.py --qkv-kv --shapes 1b 8b "$@" \
    --out "$OUT/pdl_qkv_kv_$tag.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -12
}

# sweep_configs NAME "VERSIONS" "MODELS" LIMIT LINES ARGS...: bench_gemv_configs ARGS per model and kernel version
# (eight processes fill Triton's cache, then one times every config) into gemv_configs_NAME.json, VER and MODEL in
# NAME replaced; prints the last LINES lines of each. No log file: the device tool returns only a few files.
sweep_configs() {
  local name=$1 versions=$2 models=$3 limit=$4 lines=$5 model ver i out
  shift 5
  for model in $models; do
    for ver in $versions; do
      for i in 0 1 2 3 4 5 6 7; do
        PYTHONPATH=$(pythonpath $ver) timeout "$limit" python3 benchmarks/bench_gemv_configs.py --model "$model" "$@" \
          --compile-only --shard $i/8 > /dev/null 2>&1 &
      done
      wait
      out=${name//VER/$ver}
      PYTHONPATH=$(pythonpath $ver) timeout "$limit" python3 benchmarks/bench_gemv_configs.py --model "$model" "$@" \
        --out "$OUT/gemv_configs_${out//MODEL/$model}.json" 2>&1 | grep -v Warn | tail -"$lines"
    done
  done
}

# chain_versions NAME "VERSIONS" LIMIT ARGS...: bench_gemv_chain ARGS with each kernel in turn, into
# gemv_chain_NAME.json with VER in NAME replaced by the version.
chain_versions() {
  local name=$1 versions=$2 limit=$3 ver
  shift 3
  for ver in $versions; do
    PYTHONPATH=$(pythonpath $ver) timeout "$limit" python3 benchmarks/bench_gemv_chain.py "$@" \
      --out "$OUT/gemv_chain_${name//VER/$ver}.json" 2>&1 | grep -v Warn | grep -E "^llama"
  done
}

# chain_table_vs_prefetch TAG VARIANT VALUE: chain_versions twice, the table as is vs its persistent entries with
# PREFETCH VALUE (a copy of the package in benchmarks/_VARIANT, removed after), into
# gemv_chain_TAG_{table,VARIANT}_{1,2}.json.
chain_table_vs_prefetch() {
  local tag=$1 variant=$2 value=$3 round
  rm -rf "benchmarks/_$variant" && mkdir -p "benchmarks/_$variant" && cp -r fusion_passes "benchmarks/_$variant/"
  printf '\nPERSISTENT = {k: v[:2] + (%s,) + v[3:] for k, v in PERSISTENT.items()}\n' "$value" \
    >> "benchmarks/_$variant/fusion_passes/kernels/gemv_table.py"
  for round in 1 2; do chain_versions "${tag}_VER_$round" "table $variant" 80 --variants ours; done
  rm -rf "benchmarks/_$variant"
}

# packdecode_pair MODEL LIMIT LINES BATCH...: ours with decode rows unpacked vs packed (the default), graphed step,
# 8 alternating rounds of 20 calls, into e2e_decode_packdecode_paired_MODEL_eager.json.
packdecode_pair() {
  local model=$1 limit=$2 lines=$3
  shift 3
  PYTHONPATH=. timeout "$limit" python3 benchmarks/bench_e2e.py --model "$model" --attn eager --workloads decode-1024 \
    --decode-batches "$@" --variants fusion_passes+unpackdecode+graphstep fusion_passes+graphstep --rounds 8 \
    --iters 20 --out "$OUT/e2e_decode_packdecode_paired_${model}_eager.json" 2>&1 | grep -v Warning | tail -"$lines"
}

case "${1:-}" in
  tests)  # all of pytest -m gpu (over 330 s on a fresh machine: past one call with anything else; see tests1/2)
    python3 -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -25
    python3 benchmarks/bench_norm_kernels.py 2>&1 | tail -30
    cp benchmarks/results/norm_kernels_*h200* "$OUT/" 2>/dev/null ;;
  all_tests)  # (session 58) every GPU test and tests/kernels on CUDA in one call: two xdist runs side by side, so the
    # machine's 16 cores compile in parallel (these tests check results, none times anything); -v so that a run the
    # limit cuts still shows what passed
    (timeout "${LIMIT:-560}" python3 -m pytest -m gpu -n 6 -v -rfEs -p no:cacheprovider tests --ignore=tests/kernels \
      > "$OUT/gpu_tests_all.log" 2>&1) &
    (timeout "${LIMIT:-560}" python3 -m pytest -n 4 -v -rfE -p no:cacheprovider tests/kernels > "$OUT/kernel_tests.log" 2>&1) &
    wait
    for log in gpu_tests_all kernel_tests; do
      echo "$log: $(grep -c ' PASSED ' "$OUT/$log.log") passed, $(grep -c ' SKIPPED ' "$OUT/$log.log") skipped"
      grep -E "FAILED|ERROR|[0-9]+ (passed|failed)" "$OUT/$log.log" | tail -20
    done ;;
  tests1)  # the GPU tests in two halves that each fit a call (logs/s11_run2: 16 tests took 320 s)
    python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_static_cudagraphs.py tests/patterns/test_decode_gemv.py \
      2>&1 | tee "$OUT/gpu_tests1.log" | grep -E "PASSED|FAILED|ERROR|passed|failed|^E " | tail -40 ;;
  tests2)
    python3 -m pytest -m gpu -v -p no:cacheprovider tests/patterns/test_attention_sdpa.py tests/test_hf_models.py \
      tests/test_pipeline.py tests/patterns/test_qkv_packing.py tests/patterns/test_residual_norm.py 2>&1 | tee "$OUT/gpu_tests2.log" | grep -E "PASSED|FAILED|ERROR|passed|failed|^E " | tail -40
    python3 -m pytest -q -p no:cacheprovider tests/kernels 2>&1 | tee "$OUT/kernel_tests.log" | tail -3 ;;
  decode)
    python3 benchmarks/bench_e2e.py --attn eager sdpa --workloads decode-1024 \
      --variants eager stock+cudagraphs fusion_passes+cudagraphs --budget-s 420 --out "$OUT/e2e_decode.json" 2>&1 \
      | grep -v Warning | tail -30 ;;
  profile)
    python3 benchmarks/profile_decode.py --out "$OUT/profile_decode.json" 2>&1 | grep -v Warning | tail -40 ;;
  prefill)
    python3 benchmarks/bench_e2e.py --attn eager sdpa --workloads prefill-2048 prefill-512 --batches 1 \
      --variants eager stock fusion_passes --budget-s 420 --out "$OUT/e2e_prefill.json" 2>&1 \
      | grep -v Warning | tail -30 ;;
  kernels)
    python3 benchmarks/bench_prefill_kernels.py --out "$OUT/prefill_kernels.json" 2>&1 | grep "^\[prefill\]"
    python3 benchmarks/bench_decode_attention.py --out "$OUT/decode_attention.json" 2>&1 | grep "^\[attn\]" ;;
  gemv)
    python3 benchmarks/bench_gemv.py --out "$OUT/gemv.json" 2>&1 | grep -v Warn | tail -70 ;;
  decode8b)
    python3 benchmarks/bench_e2e.py --model llama-8b --attn eager sdpa --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+cudagraphs --budget-s 420 --out "$OUT/e2e_decode_8b.json" 2>&1 \
      | grep -v Warning | tail -12 ;;
  prefill_cg)
    python3 benchmarks/bench_e2e.py --attn eager sdpa --workloads prefill-512 prefill-2048 --batches 1 8 \
      --variants stock+cudagraphs fusion_passes+cudagraphs --budget-s 480 --out "$OUT/e2e_prefill_cg.json" 2>&1 \
      | grep -v Warning | tail -20 ;;
  prefill8b)
    python3 benchmarks/bench_e2e.py --model llama-8b --attn eager sdpa --workloads prefill-2048 --batches 1 \
      --variants eager stock fusion_passes --budget-s 420 --out "$OUT/e2e_prefill_8b.json" 2>&1 | grep -v Warning | tail -10 ;;
  prefill_b8)
    python3 benchmarks/bench_e2e.py --attn eager sdpa --workloads prefill-2048 prefill-512 --batches 8 \
      --variants eager stock fusion_passes --budget-s 420 --out "$OUT/e2e_prefill_b8.json" 2>&1 | grep -v Warning | tail -16 ;;
  decode_rope)
    python3 benchmarks/bench_e2e.py --attn sdpa eager --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+cudagraphs fusion_passes+norope+cudagraphs --budget-s 420 \
      --out "$OUT/e2e_decode_rope.json" 2>&1 | grep -v Warning | tail -12 ;;
  decode_nocg)
    for model in llama-1b llama-8b; do
      python3 benchmarks/bench_e2e.py --model $model --attn sdpa eager --workloads decode-1024 \
        --variants stock fusion_passes --budget-s 250 --out "$OUT/e2e_decode_nocg_$model.json" 2>&1 \
        | grep -v Warning | tail -8
    done ;;
  prefill8b_rest)  # one attention per call (${2:-sdpa}): 8 compiles of an 8B model fill a device call
    python3 benchmarks/bench_e2e.py --model llama-8b --attn "${2:-sdpa}" --workloads prefill-512 prefill-2048 \
      --batches 1 8 --variants eager stock fusion_passes --budget-s 500 \
      --out "$OUT/e2e_prefill_8b_rest_${2:-sdpa}.json" 2>&1 | grep -v Warning | tail -14 ;;
  prefill8b_cg)  # one attention per call (${2:-sdpa})
    python3 benchmarks/bench_e2e.py --model llama-8b --attn "${2:-sdpa}" --workloads prefill-512 prefill-2048 \
      --batches 1 8 --variants stock+cudagraphs fusion_passes+cudagraphs --budget-s 500 \
      --out "$OUT/e2e_prefill_8b_cg_${2:-sdpa}.json" 2>&1 | grep -v Warning | tail -10 ;;
  decode8b_eager)
    python3 benchmarks/bench_e2e.py --model llama-8b --attn sdpa eager --workloads decode-1024 --variants eager \
      --budget-s 250 --out "$OUT/e2e_decode_8b_eager.json" 2>&1 | grep -v Warning | tail -4 ;;
  decode_nocg8b)  # one attention (${2:-eager}), llama-8b, without CUDA graphs
    python3 benchmarks/bench_e2e.py --model llama-8b --attn "${2:-eager}" --workloads decode-1024 \
      --variants stock fusion_passes --budget-s 250 --out "$OUT/e2e_decode_nocg_8b_${2:-eager}.json" 2>&1 \
      | grep -v Warning | tail -6 ;;
  inline_tests)
    FUSION_PASSES_DECODE_ATTENTION_INLINE=on python3 -m pytest -m gpu -q -p no:cacheprovider \
      tests/patterns/test_attention_sdpa.py tests/patterns/test_decode_gemv.py tests/test_hf_models.py 2>&1 \
      | tee "$OUT/gpu_tests_inline.log" | tail -6
    python3 -m pytest -q -p no:cacheprovider tests/kernels/test_decode_attention_kernel.py 2>&1 \
      | tee -a "$OUT/gpu_tests_inline.log" | tail -3 ;;
  inline)
    for model in llama-1b llama-8b; do
      python3 benchmarks/bench_e2e.py --model $model --attn eager sdpa --workloads decode-1024 \
        --variants stock fusion_passes fusion_passes+inline fusion_passes+inline+cudagraphs --budget-s 200 \
        --out "$OUT/e2e_decode_inline_$model.json" 2>&1 | grep -v Warning | tail -10
    done ;;
  kv_tests)
    FUSION_PASSES_DECODE_KV_WRITE=on timeout 420 python3 -m pytest -m gpu -q -p no:cacheprovider \
      tests/patterns/test_decode_gemv.py tests/test_hf_models.py tests/test_pipeline.py 2>&1 \
      | tee "$OUT/gpu_tests_kv.log" | tail -6
    timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_kernel.py 2>&1 \
      | tee -a "$OUT/gpu_tests_kv.log" | tail -3 ;;
  kv)  # model (${2:-llama-1b}), attention (${3:-eager})
    python3 benchmarks/bench_e2e.py --model "${2:-llama-1b}" --attn "${3:-eager}" --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+cudagraphs fusion_passes+kv+cudagraphs --budget-s 300 \
      --out "$OUT/e2e_decode_kv_${2:-llama-1b}_${3:-eager}.json" 2>&1 | grep -v Warning | tail -6 ;;
  kv_bench)
    python3 benchmarks/bench_kv_write.py --out "$OUT/kv_write.json" 2>&1 | grep -v Warn | tail -72 ;;
  combo)  # llama-1b decode with CUDA graphs, with and without Inductor's combo kernels, stock and ours
    python3 benchmarks/bench_e2e.py --attn eager sdpa --workloads decode-1024 --variants stock+cudagraphs \
      stock+combo+cudagraphs fusion_passes+cudagraphs fusion_passes+combo+cudagraphs --budget-s 480 \
      --out "$OUT/e2e_decode_combo.json" 2>&1 | grep -v Warning | tail -12 ;;
  code)  # the kernels of one 1B decode step, each with the graph nodes it computes (${2:-eager} attention)
    python3 benchmarks/decode_code.py --attn "${2:-eager}" --code-out "$OUT/decode_step_code_${2:-eager}.py" \
      --out "$OUT/decode_code_${2:-eager}.json" 2>&1 | grep -v Warn | tail -60 ;;
  profile_kv)
    python3 benchmarks/profile_decode.py --variants fusion_passes+cudagraphs fusion_passes+kv+cudagraphs \
      --out "$OUT/profile_decode_kv.json" 2>&1 | grep -v Warning | tail -45 ;;
  final)
    model=${2:-llama-1b}; attn=${3:-eager}; shift $(( $# < 3 ? $# : 3 ))
    python3 benchmarks/bench_e2e.py --model "$model" --attn "$attn" --workloads decode-1024 \
      --variants ${@:-stock+cudagraphs fusion_passes+cudagraphs fusion_passes+nokv+cudagraphs} --budget-s 400 \
      --out "$OUT/e2e_decode_final_${model}_${attn}.json" 2>&1 | grep -v Warning | tail -8 ;;
  graphs)  # 1B decode replayed three ways (trees, static graphs, the whole step graphed), then the graphed step's floor
    model=${2:-llama-1b}; attn=${3:-eager}
    python3 benchmarks/bench_e2e.py --model "$model" --attn "$attn" --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+cudagraphs fusion_passes+static fusion_passes+graphstep --budget-s 400 \
      --out "$OUT/e2e_decode_graphs_${model}_${attn}.json" 2>&1 | grep -v Warning | tail -8
    timeout 150 python3 benchmarks/probe_graph_floor.py --model "$model" --out "$OUT/graph_floor_${model}.json" 2>&1 \
      | grep -v -i warn | tail -9 ;;
  generate)  # greedy generation end to end: HF generate (eager, stock, ours trees, ours static) vs the graphed loop
    python3 benchmarks/bench_generate.py --model "${2:-llama-1b}" --attn "${3:-sdpa}" \
      --out "$OUT/generate_${2:-llama-1b}_${3:-sdpa}.json" 2>&1 | grep -v -i warn | tail -10 ;;
  table)
    model=${2:-llama-1b}; shift $(( $# < 2 ? $# : 2 ))
    python3 benchmarks/bench_e2e.py --model "$model" --attn ${@:-eager sdpa} --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+notable+nostate+cudagraphs fusion_passes+cudagraphs \
      fusion_passes+kv+cudagraphs --budget-s 500 --out "$OUT/e2e_decode_table_$model.json" 2>&1 \
      | grep -v Warning | tail -14 ;;
  configs)  # Triton compiles the configs in 8 processes first (CPU-bound), then one process times them
    sweep_configs MODEL new "${2:-llama-1b}" 300 40 ;;
  persist)  # the persistent GEMV form's configs for ${2:-llama-1b}, next to the table's entries (compiled in 8 processes)
    sweep_configs persist_MODEL new "${2:-llama-1b}" 240 40 --persistent-only ;;
  constdims)  # (session 26) the persistent q/k/v configs (RoPE form, and with the cache stores) and the table's entry,
              # the kernel of the previous commit (its fusion_passes copied to benchmarks/_old, untracked) vs this one,
              # per model in alternation; then this kernel's tests on CUDA
    sweep_configs constdims_VER_MODEL "old new" "${2:-llama-1b llama-8b}" 150 14 --linears qkv qkv_kv \
      --persistent-only --per-sm 3 4 6 --block-n 1 --warps 4 8
    timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_kernel.py 2>&1 \
      | tee "$OUT/gemv_kernel_tests.log" | tail -3 ;;
  s26)  # (session 26) after constdims: the decode_gemv GPU tests (the constexprs through Inductor), the chain per linear
        # with the previous commit (benchmarks/_old) and this one in alternation, then the 1B decode step
    timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/patterns/test_decode_gemv.py 2>&1 \
      | tee "$OUT/gpu_tests_decode_gemv.log" | tail -3
    chain_versions s26_VER "old new" 120 --variants ours read
    timeout 240 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+graphstep --budget-s 200 \
      --out "$OUT/e2e_decode_s26_llama-1b_eager.json" 2>&1 | grep -v Warning | tail -6 ;;
  kvsweep)  # (session 26) every persistent config of the cache-writing q/k/v with this kernel (constexpr head dims),
            # each checked against the reference, next to the table's entry
    sweep_configs kvsweep_MODEL new "${2:-llama-1b llama-8b}" 200 8 --linears qkv_kv --persistent-only \
      --per-sm 2 3 4 6 ;;
  s26_final)  # (session 26) the chain per linear and the 8B decode step with the final table
    timeout 120 python3 benchmarks/bench_gemv_chain.py --variants ours read --out "$OUT/gemv_chain_s26_final.json" 2>&1 \
      | grep -v Warn | tail -6
    timeout 240 python3 benchmarks/bench_e2e.py --model llama-8b --attn eager --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+graphstep --budget-s 200 \
      --out "$OUT/e2e_decode_s26_final_llama-8b_eager.json" 2>&1 | grep -v Warning | tail -4 ;;
  regcap)  # (session 26) the persistent configs' register cap (maxnreg in the config kwargs): the 1B graphed decode step
           # through Inductor, then the chain's GEMVs with the previous commit (benchmarks/_old, untracked) and this one
    timeout 150 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 \
      --variants fusion_passes+graphstep --budget-s 60 --out "$OUT/e2e_decode_regcap_llama-1b_eager.json" 2>&1 \
      | grep -v Warning | tail -3
    chain_versions regcap_VER "old new" 60 --variants ours ;;
  s27)  # (session 27) the persistent configs of the cache-writing q/k/v and of gate/up: the previous commit's kernel
        # (benchmarks/_old, untracked; two row sums) vs this one (one joined sum), per model in alternation; then this
        # kernel's persistent-form tests on CUDA (logs/s27_run1 also swept two blocks requested ahead, since removed)
    sweep_configs s27_VER_MODEL "old new" "${2:-llama-1b llama-8b}" 150 8 --linears qkv_kv gate_up --persistent-only \
      --per-sm 2 3 4 6 8 --block-n 1 --warps 4 8
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_kernel.py -k persistent 2>&1 \
      | tee "$OUT/gemv_kernel_tests.log" | tail -3 ;;
  s27_step)  # (session 27) after s27: the decode_gemv GPU tests, the chain per linear with the previous commit's
             # kernel (benchmarks/_old) and this one in alternation (twice), then the 1B graphed decode step
    timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/patterns/test_decode_gemv.py 2>&1 \
      | tee "$OUT/gpu_tests_decode_gemv.log" | tail -3
    for round in 1 2; do chain_versions "s27_VER_$round" "old new" 100 --variants ours; done
    timeout 200 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+graphstep --budget-s 150 \
      --out "$OUT/e2e_decode_s27_llama-1b_eager.json" 2>&1 | grep -v Warning | tail -4 ;;
  s27_tests)  # (session 27) the joined row sum's GPU tests, side by side: decode_gemv through Inductor, the GEMV kernel
              # on CUDA
    (timeout ${S27_LIMIT:-290} python3 -m pytest -m gpu -q -p no:cacheprovider tests/patterns/test_decode_gemv.py \
      > "$OUT/gpu_tests_decode_gemv.log" 2>&1) &
    (timeout ${S27_LIMIT:-290} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_kernel.py \
      > "$OUT/gemv_kernel_tests.log" 2>&1) &
    wait
    tail -3 "$OUT/gpu_tests_decode_gemv.log"; tail -3 "$OUT/gemv_kernel_tests.log" ;;
  s28)  # (session 28) RoPE's cos / sin requested before the persistent loop's reduction (commit a705767's kernel,
        # checked out then) vs after it, in the epilogue (benchmarks/_old, untracked: this commit's): the cache-writing
        # q/k/v's persistent configs per model in alternation, then the chain per linear old / new twice
    sweep_configs s28_VER_MODEL "old new" "llama-1b llama-8b" 120 4 --linears qkv_kv --persistent-only \
      --per-sm 3 4 6 8 --block-n 1 --warps 4 8
    for round in 1 2; do chain_versions "s28_VER_$round" "old new" 80 --variants ours; done ;;
  s28b)  # (session 28) each persistent block also requests the block after next into L2 (PREFETCH 2, PTX prefetch;
         # the kernel and bench_gemv_configs --ahead of commit b881331, since removed): every persistent linear's
         # configs with and without it, per model; then the chain per linear, the table as is vs its persistent
         # entries with PREFETCH 2 (benchmarks/_l2, made here), in alternation, twice
    sweep_configs s28_l2_MODEL new "llama-1b llama-8b" 150 6 --linears qkv_kv gate_up o down --persistent-only \
      --per-sm 3 4 6 8 --block-n 1 --warps 4 8 --ahead 1 2
    chain_table_vs_prefetch s28 l2 2 ;;
  s28c)  # (session 28) the persistent loop carries each block's columns from the load ahead to its epilogue (index math
         # once a block; commit cbe5532's kernel, since backed out) vs recomputing them (benchmarks/_old, untracked):
         # the cache-writing q/k/v's configs per model in alternation, then the chain per linear old / new twice
    sweep_configs s28c_VER_MODEL "old new" "llama-1b llama-8b" 120 4 --linears qkv_kv --persistent-only \
      --per-sm 3 4 6 8 --block-n 1 --warps 4 8
    for round in 1 2; do chain_versions "s28c_VER_$round" "old new" 80 --variants ours; done ;;
  smem)  # (session 29, logs/s29_run1) the persistent loop staging blocks in shared memory (no PREFETCH; the
         # kernel and bench_gemv_configs --smem of commit f884712, since removed): every persistent linear's configs
         # with PREFETCH (the next block into registers) and without, per model; then the chain, the table as is vs
         # its persistent entries without PREFETCH (benchmarks/_smem, made here), twice; then the GEMV kernel's
         # persistent tests on CUDA (both forms)
    sweep_configs smem_MODEL new "llama-1b llama-8b" 150 6 --linears qkv_kv gate_up o down --persistent-only \
      --per-sm 2 3 4 6 8 --block-n 1 --warps 4 8 --smem
    chain_table_vs_prefetch smem smem False
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_kernel.py -k persistent 2>&1 \
      | tee "$OUT/gemv_kernel_tests.log" | tail -3 ;;
  mma)  # (session 30) probe_split_gemv's mma design (x padded to 16 columns, tl.dot, the weight tiles pipelined by
        # Triton) against its persist design and the read floor, the six llama-1b / 8b shapes, no norm
    timeout 540 python3 benchmarks/probe_split_gemv.py --designs mma persist --out "$OUT/split_gemv_mma.json" 2>&1 \
      | grep -v -e Warn -e skipped | tail -60 ;;
  batched)  # (session 30) decode at 1024 context of several sequences at once, eager attention: stock with
            # Inductor's CUDA graphs vs ours with them and with the graphed step; default llama-1b at 4 and 16
    model=${2:-llama-1b}
    batches=${*:3}
    timeout 540 python3 benchmarks/bench_e2e.py --model "$model" --attn eager --workloads decode-1024 \
      --decode-batches ${batches:-4 16} --variants stock+cudagraphs fusion_passes+cudagraphs fusion_passes+graphstep \
      --budget-s 420 --out "$OUT/e2e_decode_batched_${model}_eager.json" 2>&1 | grep -v Warning | tail -12 ;;
  packdecode)  # (session 30) ours at batched decode with the decode-sized groups decode_gemv leaves to cuBLAS
               # packed into one GEMM or not, graphed step; 8B at 8 sequences, then 1B at 4 and 16
    timeout 250 python3 benchmarks/bench_e2e.py --model llama-8b --attn eager --workloads decode-1024 \
      --decode-batches 8 --variants fusion_passes+graphstep fusion_passes+packdecode+graphstep \
      --out "$OUT/e2e_decode_packdecode_llama-8b_eager.json" 2>&1 | grep -v Warning | tail -4
    timeout 280 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 \
      --decode-batches 4 16 --variants fusion_passes+graphstep fusion_passes+packdecode+graphstep --budget-s 200 \
      --out "$OUT/e2e_decode_packdecode_llama-1b_eager.json" 2>&1 | grep -v Warning | tail -6 ;;
  packdecode_paired)  # (session 30) after qkv_packing's default became "2-16 decode rows packed": ours vs ours
                      # with them unpacked (the old default), graphed step, 8 alternating rounds of 20 calls
    packdecode_pair llama-8b 250 4 8
    packdecode_pair llama-1b 280 6 4 16 ;;
  s31_verify)  # (session 31) cuda_graph_step captures again when packed_linear moves weights: its GPU regression
               # test and the qkv_packing GPU tests, then the paired 1B graphed steps, unpacked vs packed decode rows
    PYTHONPATH=. timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_static_cudagraphs.py \
      tests/patterns/test_qkv_packing.py 2>&1 | grep -E "passed|failed|Error|^E " | tail -15
    packdecode_pair llama-1b 280 8 4 16 ;;
  headline)  # (session 35) the shipped code side by side in one call: 1B and 8B decode steps (the uncompiled model,
             # stock with CUDA graphs, ours with the graphed step; eager attention), then the chain per linear
    headline_runs s35 ;;
  s36)  # (session 36) HF generate with its default DynamicCache, model.forward compiled (no CUDA graphs): uncompiled,
        # stock, ours; then the Qwen2-shape 512 x 1 prefill, paired: stock, ours, ours without the packing
    timeout 330 python3 benchmarks/bench_generate.py --model llama-1b --attn sdpa --prompt 1024 --new 64 --few 16 \
      --repeats 3 --variants eager stock+dynamic fusion_passes+dynamic \
      --out "$OUT/generate_dynamic_s36_llama-1b.json" 2>&1 | grep -v Warning | tail -8
    timeout 230 python3 benchmarks/bench_e2e.py --model qwen2-1.5b --attn eager --workloads prefill-512 --batches 1 \
      --variants stock fusion_passes fusion_passes+nopack --rounds 8 --iters 10 \
      --out "$OUT/e2e_prefill_s36_qwen2-1.5b_paired.json" 2>&1 | grep -v Warning | tail -8 ;;
  compile)  # (session 36) where the first call's compile time goes, stock vs ours, fresh caches: 1B decode profiled,
            # then the 8B decode's times alone
    timeout 300 python3 benchmarks/profile_compile.py --model llama-1b --workload decode-1024 --profile \
      --out "$OUT/compile_s36_llama-1b.json" 2>&1 | grep -v Warning | tail -6
    timeout 250 python3 benchmarks/profile_compile.py --model llama-8b --workload decode-1024 \
      --out "$OUT/compile_s36_llama-8b.json" 2>&1 | grep -v Warning | tail -6 ;;
  s37)  # (session 37) fusion_passes.kernels.access_memo: its GPU test, then first-call compile times (fresh caches)
    timeout 120 python3 -m pytest -q -m gpu tests/kernels/test_access_memo.py 2>&1 | tail -4
    timeout 240 python3 benchmarks/profile_compile.py --model llama-1b --workload decode-1024 \
      --variants stock fusion_passes fusion_passes-nomemo \
      --out "$OUT/compile_s37_llama-1b.json" 2>&1 | grep -v Warning | tail -6
    timeout 220 python3 benchmarks/profile_compile.py --model llama-8b --workload decode-1024 \
      --variants fusion_passes stock --out "$OUT/compile_s37_llama-8b.json" 2>&1 | grep -v Warning | tail -6 ;;
  peers)  # (session 38) peers on the same model code, side by side per workload (see the usage line above)
    python3 -m pip install -q --no-deps --no-index .peers/liger_kernel-*.whl 2>&1 | tail -2
    timeout 330 python3 benchmarks/bench_e2e.py --model llama-1b --attn sdpa eager --workloads decode-1024 \
      --variants eager stock+cudagraphs stock+freeze+cudagraphs liger liger+stock+cudagraphs fusion_passes+graphstep \
      --budget-s 300 --out "$OUT/e2e_decode_s38_peers_llama-1b.json" 2>&1 | grep -v Warning | tail -16
    timeout 200 python3 benchmarks/bench_e2e.py --model llama-1b --attn sdpa --workloads prefill-512 --batches 1 \
      --variants eager stock stock+freeze liger liger+stock fusion_passes --budget-s 170 \
      --out "$OUT/e2e_prefill_s38_peers_llama-1b.json" 2>&1 | grep -v Warning | tail -10 ;;
  peers8b)  # (session 39) peers on the same model code at the 8B shape: decode, sdpa attention
    python3 -m pip install -q --no-deps --no-index .peers/liger_kernel-*.whl 2>&1 | tail -2
    timeout 560 python3 benchmarks/bench_e2e.py --model llama-8b --attn sdpa --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+graphstep stock+freeze+cudagraphs liger+stock+cudagraphs eager liger \
      --budget-s 520 --out "$OUT/e2e_decode_s39_peers_llama-8b.json" 2>&1 | grep -vE "$EXIT_NOISE" | tail -12 ;;
  peers8b_prefill)  # (session 39) the same at the 8B shape, a 512 x 1 prompt
    python3 -m pip install -q --no-deps --no-index .peers/liger_kernel-*.whl 2>&1 | tail -2
    timeout 400 python3 benchmarks/bench_e2e.py --model llama-8b --attn sdpa --workloads prefill-512 --batches 1 \
      --variants stock fusion_passes stock+freeze liger+stock eager liger --budget-s 330 \
      --out "$OUT/e2e_prefill_s39_peers_llama-8b.json" 2>&1 | grep -vE "$EXIT_NOISE" | tail -10 ;;
  s28_steps)  # (session 28) the final kernel's graphed decode steps, 1B then 8B: stock vs ours, eager attention
    timeout 200 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+graphstep --budget-s 150 \
      --out "$OUT/e2e_decode_s28_llama-1b_eager.json" 2>&1 | grep -v Warning | tail -4
    timeout 250 python3 benchmarks/bench_e2e.py --model llama-8b --attn eager --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+graphstep --budget-s 200 \
      --out "$OUT/e2e_decode_s28_llama-8b_eager.json" 2>&1 | grep -v Warning | tail -4 ;;
  prefill_host)  # session 20: llama-1b prefill 512 x 1 without CUDA graphs (the README's one prefill loss), then
                 # its host time vs GPU-busy time and the top host functions, stock vs ours, eager attention
    timeout 240 python3 benchmarks/bench_e2e.py --attn eager sdpa --workloads prefill-512 --batches 1 \
      --variants eager stock fusion_passes --out "$OUT/e2e_prefill512.json" 2>&1 | grep -v Warn | tail -12
    timeout 300 python3 benchmarks/decode_overhead.py --workload prefill-512 --variants stock fusion_passes \
      --cprofile 10 --top 30 --out "$OUT/prefill_overhead.json" 2>&1 | grep -v Warn | tail -75 ;;
  host_ops)  # session 20: host time per call of the ops the 1B 512-token prefill graphs differ in, and of the
             # compiled models (packed_linear's paths counted); then the prefill with ours timed before stock
    timeout 200 python3 benchmarks/probe_host_overhead.py --out "$OUT/host_overhead.json" 2>&1 | grep -v Warn | tail -14
    timeout 200 python3 benchmarks/bench_e2e.py --attn eager --workloads prefill-512 --batches 1 \
      --variants fusion_passes stock --out "$OUT/e2e_prefill512_reversed.json" 2>&1 | grep -v Warn | tail -5 ;;
  paired_prefill)  # the prefill rows within noise of stock, paired (bench_e2e --rounds): 1B 512 x 1 / 8, both
                   # attentions, with and without CUDA graphs; 8B sdpa 512 x 8
    timeout 400 python3 benchmarks/bench_e2e.py --attn eager sdpa --workloads prefill-512 --rounds 15 --iters 10 \
      --variants stock fusion_passes stock+cudagraphs fusion_passes+cudagraphs \
      --out "$OUT/e2e_prefill_paired_llama-1b.json" 2>&1 | grep -v Warn | tail -20
    timeout 170 python3 benchmarks/bench_e2e.py --model llama-8b --attn sdpa --workloads prefill-512 --batches 8 \
      --rounds 15 --iters 10 --variants stock fusion_passes --out "$OUT/e2e_prefill_paired_llama-8b.json" 2>&1 \
      | grep -v Warn | tail -6 ;;
  paired_parts)  # where ours' host time goes at the 1B 512 x 1 prefill without graphs: ours without each family,
                 # paired (sdpa attention first: is the order of the two a factor?); logs/s21_run3 also had ours
                 # without cuDNN's attention (a setting since removed)
    timeout 450 python3 benchmarks/bench_e2e.py --attn sdpa eager --workloads prefill-512 --batches 1 --rounds 15 \
      --iters 10 --variants stock fusion_passes fusion_passes+noattn fusion_passes+nopack \
      --out "$OUT/e2e_prefill_paired_parts.json" 2>&1 | grep -v Warn | tail -14 ;;
  paired_nopack_cg)  # does the packing pay on the GPU at prefill? 1B 512 x 8 / 1 with CUDA graphs, paired
    timeout 170 python3 benchmarks/bench_e2e.py --attn eager --workloads prefill-512 --batches 8 1 --rounds 10 \
      --iters 10 --variants stock+cudagraphs fusion_passes+cudagraphs fusion_passes+nopack+cudagraphs \
      --out "$OUT/e2e_prefill_paired_nopack_cg.json" 2>&1 | grep -v Warn | tail -8 ;;
  paired_nopack)  # (prepared in session 21) the packing's host cost without CUDA graphs: 1B prefill 512 x 1 / 8,
                  # stock vs ours vs ours without the packing, paired, stock again as the control (the 2048-token
                  # calls are GPU-bound, where the packing gains); then per-op host times ("host only:"
                  # rows: tiny shapes, so the GPU is not the bound); first the packing's GPU tests (its steady
                  # state changed in session 21)
    timeout 100 python3 -m pytest -q -p no:cacheprovider tests/patterns/test_qkv_packing.py -m gpu 2>&1 | tail -2
    timeout 380 python3 benchmarks/bench_e2e.py --attn eager --workloads prefill-512 --rounds 15 --iters 10 \
      --control --variants stock fusion_passes fusion_passes+nopack --out "$OUT/e2e_prefill_paired_nopack.json" \
      2>&1 | grep -v Warn | tail -12
    timeout 150 python3 benchmarks/probe_host_overhead.py --no-models --out "$OUT/host_ops.json" 2>&1 \
      | grep -v Warn | tail -20 ;;
  profile_prefill)  # (prepared in session 21) why ours with eager attention takes 0.25 ms more GPU time than ours
                    # with sdpa at 1B 512 x 1 under CUDA graphs (logs/s21_run2: 3.15 vs 2.90 ms): both kernel lists
    for attn in eager sdpa; do
      timeout 150 python3 benchmarks/profile_decode.py --workload prefill-512 --attn $attn --steps 5 --top 25 \
        --variants fusion_passes+cudagraphs stock+cudagraphs --out "$OUT/profile_prefill_$attn.json" 2>&1 \
        | grep -v Warn | tail -70
    done ;;
  sdpa_forms)  # (prepared in session 21) which SDPA call the attention rewrite should make at prefill: GQA + causal
              # (now), K/V repeated + causal, K/V repeated + mask (HF's sdpa), GQA + mask (session 23: would a
              # padding mask take GQA faster?), each under PyTorch's backend choice and each backend alone, per
              # shape of ${2:-llama-1b} (session 23 ran it with --backends auto: the whole list takes over 560 s)
    timeout 560 python3 benchmarks/bench_prefill_kernels.py --model "${2:-llama-1b}" --families attention \
      --sdpa-forms --out "$OUT/prefill_sdpa_forms_${2:-llama-1b}.json" 2>&1 | grep "^\[prefill\]" ;;
  sdpa_prefill)  # (session 23) before this session nothing fired on HF's sdpa prompt attention: ours+noattn is that
    timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/patterns/test_attention_sdpa.py 2>&1 | tail -3
    timeout 420 python3 benchmarks/bench_e2e.py --model "${2:-llama-1b}" --attn sdpa --workloads prefill-512 \
      prefill-2048 --batches 1 8 --rounds 10 --iters 10 --variants stock fusion_passes fusion_passes+noattn \
      --out "$OUT/e2e_prefill_sdpa_rewrite_${2:-llama-1b}.json" 2>&1 | grep -v Warn | tail -16 ;;
  sdpa_prefill_rest)
    timeout 200 python3 benchmarks/bench_e2e.py --attn sdpa --workloads prefill-2048 --batches 8 --rounds 8 \
      --iters 5 --variants stock fusion_passes fusion_passes+noattn --out "$OUT/e2e_prefill_sdpa_rewrite_2048x8.json" \
      2>&1 | grep -v Warn | tail -5
    timeout 340 python3 benchmarks/bench_e2e.py --attn sdpa --workloads prefill-512 prefill-2048 --batches 1 \
      --rounds 8 --iters 10 --variants stock+cudagraphs fusion_passes+cudagraphs fusion_passes+noattn+cudagraphs \
      --out "$OUT/e2e_prefill_sdpa_rewrite_cg.json" 2>&1 | grep -v Warn | tail -8 ;;
  sdpa_prefill8b)
    timeout 560 python3 benchmarks/bench_e2e.py --model llama-8b --attn sdpa --workloads prefill-512 prefill-2048 \
      --batches 1 --rounds 8 --iters 5 --variants stock fusion_passes fusion_passes+noattn \
      --out "$OUT/e2e_prefill_sdpa_rewrite_llama-8b.json" 2>&1 | grep -v Warn | tail -8 ;;
  padded)
    timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/patterns/test_attention_sdpa.py \
      tests/test_hf_models.py 2>&1 | tail -3
    timeout 330 python3 benchmarks/bench_e2e.py --attn sdpa eager --workloads padded-512 padded-2048 --batches 8 \
      --rounds 8 --iters 5 --variants stock fusion_passes fusion_passes+noattn \
      --out "$OUT/e2e_padded_llama-1b.json" 2>&1 | grep -v Warn | tail -14 ;;
  l2next)  # (session 33; needs commit 3df03d5's kernel and bench_gemv_chain, since removed) every GEMV of the chain
           # requests the next GEMV's first MB into L2 by TMA bulk prefetch, at the start or the end of each program,
           # vs as shipped; per model, two rounds in order
    for m in "llama-1b 4 8 16" "llama-8b 8 16 32"; do set -- $m
      python3 benchmarks/bench_gemv_chain.py --models "$1" --variants ours ours-l2end ours-l2start read \
        --l2-mb "$2" "$3" "$4" --repeat 2 --out "$OUT/gemv_chain_l2next_$1.json" 2>&1 | grep -v Warn \
        | grep -E "^llama" | cut -c1-330
    done ;;
  earlyloads)  # (session 34; needs commit 188a3a8's kernel and benchmarks, since removed) FUSION_PASSES_GEMV_LOADS=early:
               # the persistent loop's next-block loads kept ahead of the block's multiply-adds by an always-true
               # branch. Its kernel tests on CUDA, then the chain in both orders, then the decode_gemv GPU tests
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_kernel.py -k "early_loads or persistent" \
      2>&1 | tee "$OUT/kernel_tests.log" | tail -3
    for order in "ours ours-earlyloads read" "ours-earlyloads ours read"; do
      timeout 150 python3 benchmarks/bench_gemv_chain.py --variants $order --out "$OUT/gemv_chain_earlyloads_${order%% *}.json" \
        2>&1 | grep -v Warn | grep -E "^llama" | cut -c1-330
    done
    FUSION_PASSES_GEMV_LOADS=early timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider \
      tests/patterns/test_decode_gemv.py 2>&1 | tee "$OUT/gpu_tests_decode_gemv_early.log" | tail -3 ;;
  earlyloads_configs)  # (session 34; needs commit 188a3a8) the persistent configs of the 8B q/k/v (cache-writing) and
                       # o and the 1B down, each with and without FUSION_PASSES_GEMV_LOADS=early's loop
    sweep_configs earlyloads_MODEL new llama-8b 120 8 --linears qkv_kv o --persistent-only --early-loads \
      --per-sm 2 3 4 --block-n 1 2 --warps 4 8
    sweep_configs earlyloads_MODEL new llama-1b 100 4 --linears down --persistent-only --early-loads --per-sm 2 3 4 \
      --block-n 1 2 --warps 4 8 ;;
  chain)
    python3 benchmarks/bench_gemv_chain.py --rows 1 8 --variants cublas ours ours-noprefetch read --out "$OUT/gemv_chain.json" 2>&1 | grep -v Warn | tail -16 ;;
  design)  # compiles in 8 processes first, then one process times (logs/s12_run4, s12_run5)
    for i in 0 1 2 3 4 5 6 7; do
      timeout 200 python3 benchmarks/probe_gemv_design.py --norms 0 1 2 --compile-only --shard $i/8 > /dev/null 2>&1 &
    done
    wait
    timeout 300 python3 benchmarks/probe_gemv_design.py --norms 0 1 2 --out "$OUT/gemv_design.json" 2>&1 | grep -v Warn \
      | grep -A3 "design\|best" | head -80 ;;
  diag_generate)  # how HF generate's compiled graphs run (static graphs, dynamic=False)
    timeout 400 python3 benchmarks/diag_generate_graphs.py 2>&1 | grep -v -i warn | tail -60 ;;
  kernel_tests)
    timeout 500 python3 -m pytest -q -p no:cacheprovider -rs tests/kernels 2>&1 | tee "$OUT/kernel_tests.log" | tail -8 ;;
  normlate)  # FUSION_PASSES_GEMV_NORM=late: the chain's per-linear times, then the decode step (${2:-llama-1b})
    timeout 200 python3 benchmarks/bench_gemv_chain.py --models "${2:-llama-1b}" --variants ours ours-late read \
      --out "$OUT/gemv_chain_normlate.json" 2>&1 | grep -v Warn | tail -6
    timeout 380 python3 benchmarks/bench_e2e.py --model "${2:-llama-1b}" --attn eager --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+graphstep fusion_passes+normlate+graphstep --budget-s 300 \
      --out "$OUT/e2e_decode_normlate_${2:-llama-1b}.json" 2>&1 | grep -v Warning | tail -6 ;;
  qwen2|arch)  # qwen2 [attn], or arch <model> [attn]
    if [ "$1" = qwen2 ]; then model=qwen2-1.5b; attn=${2:-eager}; else model=${2:-gemma-2b}; attn=${3:-eager}; fi
    python3 benchmarks/bench_e2e.py --model "$model" --attn "$attn" --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+cudagraphs fusion_passes+graphstep --budget-s 420 \
      --out "$OUT/e2e_decode_${model}_${attn}.json" 2>&1 | grep -v Warning | tail -6 ;;
  validate1)  # the tests first (they compile in parallel, CPU-bound); the timing runs after, on a quiet GPU
    (SKIP_INSTALL=1 timeout 300 bash "$0" kernel_tests > "$OUT/v1_kernels.log" 2>&1) &
    (SKIP_INSTALL=1 timeout 330 bash "$0" tests1 > "$OUT/v1_tests1.log" 2>&1) &
    wait
    tail -4 "$OUT/v1_kernels.log"; tail -6 "$OUT/v1_tests1.log"
    SKIP_INSTALL=1 timeout 230 bash "$0" normlate llama-1b ;;
  validate2)
    (timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/patterns/test_attention_sdpa.py \
      tests/test_hf_models.py tests/test_pipeline.py tests/patterns/test_qkv_packing.py \
      tests/patterns/test_residual_norm.py > "$OUT/v2_tests2.log" 2>&1) &
    (SKIP_INSTALL=1 timeout 300 bash "$0" generate > "$OUT/v2_generate.log" 2>&1) &
    wait
    tail -8 "$OUT/v2_tests2.log"; tail -8 "$OUT/v2_generate.log"
    SKIP_INSTALL=1 timeout 140 bash "$0" qwen2
    SKIP_INSTALL=1 timeout 130 bash "$0" arch gemma-2b ;;
  validate3)
    timeout 120 python3 benchmarks/bench_gemv.py --models gemma-2b qwen2-1.5b --rows 1 --variants cublas ours \
      --out "$OUT/gemv_gemma_qwen2.json" 2>&1 | grep "^\[gemv\]"
    timeout 120 python3 benchmarks/bench_gemv_chain.py --models llama-1b llama-8b --variants ours read \
      --out "$OUT/gemv_chain_kvform.json" 2>&1 | grep -v Warn | tail -6
    timeout 110 python3 benchmarks/probe_l2_prefetch.py --out "$OUT/l2_prefetch.json" 2>&1 | grep -v Warn | tail -14
    timeout 200 python3 benchmarks/bench_e2e.py --model gemma-2b --attn eager --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+notable+graphstep fusion_passes+graphstep --budget-s 180 \
      --out "$OUT/e2e_decode_table_gemma-2b_eager.json" 2>&1 | grep -v Warning | tail -5 ;;
  validate4)  # session 14's unrun changes (pad_mm undo, L2 prefetch): their GPU tests beside the attention kernel's
    # CUDA tests (both compile-bound), then the 1B graphed decode step with and without the prefetch
    (timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/patterns/test_decode_gemv.py \
      tests/patterns/test_attention_sdpa.py tests/patterns/test_qkv_packing.py > "$OUT/v4_gpu_tests.log" 2>&1) &
    (timeout 300 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_decode_attention_kernel.py \
      > "$OUT/v4_kernel_tests.log" 2>&1) &
    wait
    grep -E "FAILED|ERROR|passed|failed" "$OUT/v4_gpu_tests.log" | tail -12; tail -2 "$OUT/v4_kernel_tests.log"
    timeout 215 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 \
      --variants fusion_passes+graphstep fusion_passes+l2pf+graphstep --budget-s 190 \
      --out "$OUT/e2e_decode_l2pf_llama-1b.json" 2>&1 | grep -v Warning | tail -5 ;;
  validate5)  # every M = 1 config, weights streamed: Gemma's q/k/v with the cache stores, gate/up and lm_head (to
    # list them where ours beats cuBLAS), Qwen2's q/k/v with the cache stores (both run KV_FALLBACK today)
    for i in 0 1 2 3 4 5 6 7; do
      timeout 200 python3 benchmarks/bench_gemv_configs.py --model gemma-2b --linears qkv_kv gate_up lm_head \
        --compile-only --shard $i/8 > /dev/null 2>&1 &
      timeout 200 python3 benchmarks/bench_gemv_configs.py --model qwen2-1.5b --linears qkv_kv --compile-only \
        --shard $i/8 > /dev/null 2>&1 &
    done
    wait
    timeout 170 python3 benchmarks/bench_gemv_configs.py --model gemma-2b --linears qkv_kv gate_up lm_head \
      --out "$OUT/gemv_configs_gemma-2b_more.json" 2>&1 | grep -v Warn | tail -12
    timeout 100 python3 benchmarks/bench_gemv_configs.py --model qwen2-1.5b --linears qkv_kv \
      --out "$OUT/gemv_configs_qwen2-1.5b_kv.json" 2>&1 | grep -v Warn | tail -6 ;;
  l2pf)  # the o-proj weight requested into L2 by the decode attention kernel: its GPU tests, then the decode step
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_decode_attention_kernel.py 2>&1 | tail -2
    timeout 380 python3 benchmarks/bench_e2e.py --model "${2:-llama-1b}" --attn eager --workloads decode-1024 \
      --variants fusion_passes+graphstep fusion_passes+l2pf+graphstep fusion_passes+cudagraphs \
      fusion_passes+l2pf+cudagraphs --budget-s 360 --out "$OUT/e2e_decode_l2pf_${2:-llama-1b}.json" 2>&1 \
      | grep -v Warning | tail -6 ;;
  ncu)  # (session 25) Nsight Compute: the decode GEMVs vs a read of the same weights, per linear, llama-1b and -8b
    ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
    stalls=$(for r in long_scoreboard short_scoreboard barrier wait mio_throttle math_pipe_throttle not_selected lg_throttle; do
      printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' $r; done)
    stalls=${stalls%,}
    for model in ${2:-llama-1b llama-8b}; do
      rep="$OUT/ncu_gemv_$model"
      timeout 240 "$ncu_bin" --clock-control none --profile-from-start off --nvtx \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
        --section WarpStateStats --section SchedulerStats -f -o "$rep" --metrics "$stalls" \
        python3 benchmarks/ncu_gemv.py --model "$model" --layers 4 2>&1 | grep -v -i warn | tail -6
      "$ncu_bin" --import "$rep.ncu-rep" --csv --page details > "$rep.csv"
      "$ncu_bin" --import "$rep.ncu-rep" --csv --page raw > "${rep}_raw.csv"
      python3 benchmarks/ncu_gemv.py --model "$model" --layers 4 --summarize "$rep.csv" --raw "${rep}_raw.csv"
    done ;;
  pdl)  # (session 45) design 22: GEMVs launched with PDL that load their whole weight block before waiting, vs
        # plain launches, the shipped kernels and the read floors; per shape and per layer chain (1B, 8B)
    timeout 500 python3 benchmarks/probe_pdl_preload.py --shapes ${2:-1b 8b} --out "$OUT/pdl_preload_probe.json" \
      2>&1 | grep -v Warn | tail -50 ;;
  s46_tests)  # (session 46) the PDL launches' GPU tests (kernels, chains in a CUDA graph, HF decode under trees and the
              # graphed step), the traced path's regression tests, the owed DeBERTa test; then the shipped GEMVs with
              # and without PDL, per linear and per layer chain (probe_pdl_preload --shipped-only)
    timeout 110 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_gemv_kernel.py \
      tests/kernels/test_decode_attention_kernel.py tests/kernels/test_compile_for_hopper.py -k "pdl" 2>&1 | tail -4
    timeout 290 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_static_cudagraphs.py \
      tests/patterns/test_decode_gemv.py tests/patterns/test_attention_sdpa.py \
      -k "pdl or (hf_llama_decode and on-on-auto) or gpu_deberta" \
      2>&1 | grep -E "passed|failed|FAILED|Error" | tail -12
    timeout 170 python3 benchmarks/probe_pdl_preload.py --shipped-only --shapes ${2:-1b} \
      --out "$OUT/pdl_shipped_s46.json" 2>&1 | grep -v Warn | tail -14 ;;
  s46_all)  # (session 46, when one device call is all there is) the PDL GPU tests that matter most, the 1B decode step
             # (stock, ours without / with PDL), the 1B shipped GEMVs with / without PDL
    timeout 80 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_gemv_kernel.py \
      tests/kernels/test_decode_attention_kernel.py -k "pdl" 2>&1 | tail -3
    timeout 160 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_static_cudagraphs.py \
      tests/patterns/test_decode_gemv.py -k "pdl or (hf_llama_decode and on-on-auto-1)" 2>&1 \
      | grep -E "passed|failed|FAILED|Error" | tail -10
    timeout 150 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 \
      --variants fusion_passes+graphstep+nopdl fusion_passes+graphstep+pdl --budget-s 130 \
      --out "$OUT/e2e_decode_s46_llama-1b_eager.json" 2>&1 | grep -v Warning | tail -5
    timeout 100 python3 benchmarks/probe_pdl_preload.py --shipped-only --shapes 1b \
      --out "$OUT/pdl_shipped_s46.json" 2>&1 | grep -v Warn | tail -14
    timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/patterns/test_attention_sdpa.py \
      -k gpu_deberta 2>&1 | grep -E "passed|failed|FAILED|Error" | tail -5 ;;
  s46_decode)  # (session 46) 1B and 8B decode steps, eager attention: the uncompiled model (1B), stock with CUDA graphs,
               # ours in the graphed step without PDL (as before) and with it (the default there now)
    timeout 250 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 \
      --variants eager stock+cudagraphs fusion_passes+graphstep+nopdl fusion_passes+graphstep+pdl --budget-s 220 \
      --out "$OUT/e2e_decode_s46_llama-1b_eager.json" 2>&1 | grep -v Warning | tail -7
    timeout 300 python3 benchmarks/bench_e2e.py --model llama-8b --attn eager --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+graphstep+nopdl fusion_passes+graphstep+pdl --budget-s 270 \
      --out "$OUT/e2e_decode_s46_llama-8b_eager.json" 2>&1 | grep -v Warning | tail -6 ;;
  s47)  # (session 47, one call) the DeBERTa GPU test, the shipped GEMVs (1B and 8B shapes, the H200's table) plain /
         # with PDL (the table's preload) / with PDL one block / with PDL and a persistent 1B o, then the 1B decode
         # step: stock, ours without / with PDL (the H200's table on any GPU: FUSION_PASSES_GEMV_TABLE_DEVICE)
    timeout 60 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=short -m gpu \
      tests/patterns/test_attention_sdpa.py -k gpu_deberta 2>&1 | grep -E "^E |passed|failed" | head -30
    timeout 230 python3 benchmarks/probe_pdl_preload.py --shipped-only --shapes 1b 8b --table-as "NVIDIA H200" \
      --out "$OUT/pdl_shipped_s47.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -45
    FUSION_PASSES_GEMV_TABLE_DEVICE="NVIDIA H200" timeout 270 python3 benchmarks/bench_e2e.py --model llama-1b \
      --attn eager --workloads decode-1024 --budget-s 200 \
      --variants stock+cudagraphs fusion_passes+graphstep+nopdl fusion_passes+graphstep+pdl \
      --out "$OUT/e2e_decode_s47_llama-1b_eager.json" 2>&1 | grep -v Warning | tail -6 ;;
  s47b)  # (session 47, second call) the DeBERTa GPU test after the uniform-rows fix; the shipped GEMVs' variants
          # (1B, 8B; the H200's table) with each variant's difference from the plain ops and from fp32 math
    timeout 60 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=short -m gpu \
      tests/patterns/test_attention_sdpa.py -k gpu_deberta 2>&1 | grep -E "^E |passed|failed" | head -20
    timeout 300 python3 benchmarks/probe_pdl_preload.py --shipped-only --shapes 1b 8b --table-as "NVIDIA H200" \
      --out "$OUT/pdl_shipped_s47.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -60 ;;
  s47c)  # (session 47, a last short call) the PDL twins on CUDA, two blocks before the wait included (bit for bit
          # the ops), and the DeBERTa GPU test after the uniform-rows fix
    timeout 45 python3 -m pytest -q -x -p no:cacheprovider -p no:logging --tb=short tests/kernels/test_gemv_kernel.py \
      -k pdl 2>&1 | grep -E "^E |passed|failed" | head -12
    timeout 45 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=line -m gpu \
      tests/patterns/test_attention_sdpa.py -k gpu_deberta 2>&1 | grep -E "^E |passed|failed|Error" | head -12 ;;
  s48)  # (session 48) the DeBERTa GPU test after the fp16 decode fix; the shipped GEMVs' variants with finite chain
         # inputs (session 47's unequal checks were NaN from uninitialised inputs); the 1B decode step: the H100's
         # autotuned GEMVs and the H200's table, each without / with PDL, and the table with two blocks preloaded
    timeout 45 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=line -m gpu \
      tests/patterns/test_attention_sdpa.py -k gpu_deberta 2>&1 | grep -E "^E |passed|failed|Error" | head -12
    timeout 120 python3 benchmarks/probe_pdl_preload.py --shipped-only --shapes 1b 8b --table-as "NVIDIA H200" \
      --out "$OUT/pdl_shipped_s48.json" 2>&1 | grep -v Warn | grep -v '^{' | grep -E "^check|layer|qkv|^1b|^8b" | tail -60
    timeout 400 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 --budget-s 330 \
      --variants stock+cudagraphs fusion_passes+graphstep+h200table+nopdl fusion_passes+graphstep+h200table+pdl \
      fusion_passes+graphstep+h200table+pdl2 fusion_passes+graphstep+nopdl fusion_passes+graphstep+pdl \
      --out "$OUT/e2e_decode_s48_llama-1b_eager.json" 2>&1 | grep -v Warning | tail -9 ;;
  s48b)  # (session 48) with the new defaults (PDL where graphed; an H100 SXM takes the H200's GEMV table): the 8B
          # decode step (stock, ours, ours without PDL), the 1B step with the defaults, then the graphed GPU tests
    timeout 300 python3 benchmarks/bench_e2e.py --model llama-8b --attn eager --workloads decode-1024 --budget-s 250 \
      --variants stock+cudagraphs fusion_passes+graphstep fusion_passes+graphstep+nopdl \
      --out "$OUT/e2e_decode_s48_llama-8b_eager.json" 2>&1 | grep -v Warning | tail -6
    timeout 75 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 \
      --variants fusion_passes+graphstep --out "$OUT/e2e_decode_s48_llama-1b_defaults.json" 2>&1 | grep -v Warning \
      | tail -4
    timeout 190 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=line -m gpu tests/test_static_cudagraphs.py \
      2>&1 | grep -E "^E |passed|failed|Error" | head -12 ;;
  s48c)  # (session 48) PDL_PERSISTENT (a program for every block of rows, all requested before the wait) for the 1B
          # q/k/v and o: the candidates per GEMV, the 1B decode step with / without the entries, the PDL GPU tests
    timeout 80 python3 benchmarks/probe_pdl_preload.py --pdl-candidates --table-as "NVIDIA H200" \
      --out "$OUT/pdl_candidates_s48.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -14
    timeout 130 python3 benchmarks/bench_e2e.py --model llama-1b --attn eager --workloads decode-1024 \
      --variants stock+cudagraphs fusion_passes+graphstep fusion_passes+graphstep+pdlplain \
      --out "$OUT/e2e_decode_s48c_llama-1b_eager.json" 2>&1 | grep -v Warning | tail -5
    timeout 70 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=line -m gpu tests/patterns/test_decode_gemv.py \
      -k "hf_llama_decode and on-on-auto" 2>&1 | grep -E "^E |passed|failed|Error" | head -8
    timeout 60 python3 benchmarks/probe_pdl_preload.py --shipped-only --shapes 1b --table-as "NVIDIA H200" \
      --out "$OUT/pdl_shipped_s48c.json" 2>&1 | grep -v Warn | grep -v '^{' | grep -E "^check|^1b" | tail -30 ;;
  qkv_parts)  # (for session 49) the 1B q/k/v's PDL twin by part: with / without its norm and RoPE, plain and PDL
    timeout 120 python3 benchmarks/probe_pdl_preload.py --qkv-parts --table-as "NVIDIA H200" \
      --out "$OUT/pdl_qkv_parts.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -12 ;;
  s49)  # (session 49) PDL launches request the first block's residual / cos / sin beside x, and the norm weight
         # before the wait; RoPE's products rounded as eager rounds them: the PDL GEMV GPU tests, the 1B q/k/v by
         # part, every shipped GEMV +/- PDL, the graphed HF decode GPU tests with PDL, then the 1B decode step with
         # this tree and with the previous commit's package (benchmarks/_old: git archive 63de9b8), in turn
    timeout 90 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=line -m gpu tests/kernels/test_gemv_kernel.py \
      -k pdl 2>&1 | grep -E "^E |passed|failed|Error" | head -8
    timeout 90 python3 benchmarks/probe_pdl_preload.py --qkv-parts --table-as "NVIDIA H200" \
      --out "$OUT/pdl_qkv_parts_s49.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -9
    timeout 120 python3 benchmarks/probe_pdl_preload.py --shipped-only --shapes 1b 8b --table-as "NVIDIA H200" \
      --out "$OUT/pdl_shipped_s49.json" 2>&1 | grep -v Warn | grep -v '^{' | grep -E "^1b|^8b" | tail -30
    timeout 90 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=line -m gpu tests/patterns/test_decode_gemv.py \
      -k "hf_llama_decode and on-on-auto or compiled_inside_launches_with_pdl" 2>&1 | grep -E "^E |passed|failed|Error" | head -8
    decode_step_new_old s49 140 110 ;;
  s49b)  # (session 49) after s49: the graphed HF decode GPU tests with PDL and the DeBERTa one; the PDL_PERSISTENT
          # candidates again (the first block's epilogue operands now come beside x); the kernel tests on CUDA
    timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=line -m gpu tests/patterns/test_decode_gemv.py \
      tests/patterns/test_attention_sdpa.py -k "hf_llama_decode and on-on-auto-1 or compiled_inside_launches_with_pdl or gpu_deberta" \
      2>&1 | grep -E "^E |passed|failed|Error" | head -8
    timeout 90 python3 benchmarks/probe_pdl_preload.py --pdl-candidates --table-as "NVIDIA H200" \
      --out "$OUT/pdl_candidates_s49.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -12
    timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels 2>&1 | tee "$OUT/kernel_tests.log" | tail -3 ;;
  s49c)  # (session 49) PDL_PERSISTENT candidates without PREFETCH (a program for every block, one block in registers)
    timeout 150 python3 benchmarks/probe_pdl_preload.py --pdl-candidates --table-as "NVIDIA H200" \
      --out "$OUT/pdl_candidates_s49c.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -16 ;;
  s50)  # (for session 50) the q/k/v PDL_PERSISTENT candidates without PREFETCH, those session 49 could not run too
    timeout 150 python3 benchmarks/probe_pdl_preload.py --pdl-candidates --table-as "NVIDIA H200" \
      --out "$OUT/pdl_candidates_s50.json" 2>&1 | grep -v Warn | grep -v '^{' | grep -E "^qkv|^o  *None|^o .*False, 4, 1, True, 8" ;;
  s50b)  # one warp a program: the q/k/v and o PDL_PERSISTENT candidates of session 50
    timeout 150 python3 benchmarks/probe_pdl_preload.py --pdl-candidates --table-as "NVIDIA H200" \
      --out "$OUT/pdl_candidates_s50b.json" 2>&1 | grep -v Warn | grep -v '^{' | grep -E "^qkv|^o " ;;
  s50c)  # the 1B q/k/v by part at the program-per-block configs, beside the session-45 probe kernel and read floor
    timeout 200 python3 benchmarks/probe_pdl_preload.py --qkv-parts --table-as "NVIDIA H200" \
      --entries "(4, 2048, False, 4, 1, True, 3)" "(2, 2048, False, 1, 1, True, 6)" "(4, 2048, False, 2, 1, True, 4)" \
      --out "$OUT/pdl_qkv_parts_s50.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -26 ;;
  s50d)  # (session 50) the 1B q/k/v's PDL_PERSISTENT entry (one warp a program): the PDL GEMV GPU tests, every
          # shipped GEMV +/- PDL, the graphed HF decode GPU tests with PDL, then the 1B decode step with this tree and
          # with the previous commit's package (benchmarks/_old: git archive b0f35bc), in turn
    timeout 90 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=line -m gpu tests/kernels/test_gemv_kernel.py \
      -k pdl 2>&1 | grep -E "^E |passed|failed|Error" | head -8
    timeout 120 python3 benchmarks/probe_pdl_preload.py --shipped-only --shapes 1b 8b --table-as "NVIDIA H200" \
      --out "$OUT/pdl_shipped_s50.json" 2>&1 | grep -v Warn | grep -v '^{' | grep -E "^1b|^8b" | tail -30
    timeout 90 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=line -m gpu tests/patterns/test_decode_gemv.py \
      -k "hf_llama_decode and on-on-auto or compiled_inside_launches_with_pdl" 2>&1 | grep -E "^E |passed|failed|Error" | head -8
    decode_step_new_old s50 130 100 ;;
  s50mma)  # (session 50) design 23: the GEMV on the tensor cores from the lanes' own loads (probe_mma_gemv.py)
    timeout 400 python3 benchmarks/probe_mma_gemv.py --out "$OUT/mma_gemv_probe.json" 2>&1 | grep -v Warn | tail -30 ;;
  s51)  # (for session 51) the 1B q/k/v without and with the KV-cache write (the step's form on CUDA), plain and PDL;
         # the PDL_PERSISTENT candidates, among them one-warp pairs (PDL entry, plain entry) that sum rows alike
    timeout 120 python3 benchmarks/probe_pdl_preload.py --qkv-kv --table-as "NVIDIA H200" \
      --out "$OUT/pdl_qkv_kv.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -10
    timeout 150 python3 benchmarks/probe_pdl_preload.py --pdl-candidates --table-as "NVIDIA H200" \
      --out "$OUT/pdl_candidates_s51.json" 2>&1 | grep -v Warn | grep -v '^{' | grep -E "^qkv|^o " ;;
  s51b)  # (session 51) the 1B and 8B q/k/v without and with the KV-cache write, plain and PDL, then the kernel tests
          # on CUDA (tests2's second half)
    timeout 200 python3 benchmarks/probe_pdl_preload.py --qkv-kv --shapes 1b 8b --table-as "NVIDIA H200" \
      --out "$OUT/pdl_qkv_kv_s51b.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -20
    timeout 300 python3 -m pytest -q -p no:cacheprovider tests/kernels 2>&1 | tee "$OUT/kernel_tests.log" | tail -3 ;;
  s51c)  # (session 51) each linear's cost inside the shipped layer chain (the layer with and without it), twice
    for i in 1 2; do
      timeout 150 python3 benchmarks/probe_pdl_preload.py --marginal --shapes 1b 8b --table-as "NVIDIA H200" \
        --out "$OUT/pdl_marginal_$i.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -14
    done ;;
  s52)  # (session 52) the q/k/v's cache stores by branch, not by mask: the previous commit's package (benchmarks/_old)
        # and this one in alternation (--qkv-kv), then k/v left out of the output (--kv-stores), then the kv tests
    for i in 1 2; do
      for ver in old new; do
        echo "== $ver $i"
        PYTHONPATH=$(pythonpath $ver) timeout 120 python3 benchmarks/probe_pdl_preload.py --qkv-kv --shapes 1b 8b \
          --table-as "NVIDIA H200" --out "$OUT/pdl_qkv_kv_${ver}_$i.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -16
      done
      timeout 120 python3 benchmarks/probe_pdl_preload.py --kv-stores --shapes 1b 8b --table-as "NVIDIA H200" \
        --out "$OUT/pdl_kv_stores_$i.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -20
    done
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_kernel.py -k "kv_write or bias" 2>&1 \
      | tee "$OUT/kv_tests.log" | tail -3 ;;
  s52b)  # (session 52) k/v left out of the q/k/v's output where only the cache update reads them: the HF Llama decode
         # GPU tests with the KV write (not graphed; graphed with PDL, batch 1 and 4)
    timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider tests/patterns/test_decode_gemv.py \
      -k "test_gpu_hf_llama_decode and (on-on-auto or None-on-on-off-1)" 2>&1 | tee "$OUT/hf_decode_tests.log" | tail -4 ;;
  s53)  # (session 53; needs commit 885f55d's kernel and probe, since removed) design 24: the q/k/v's later blocks
        # requested into L2 before the wait (--l2-ahead), then every shipped 1B chain and the layer with it on every
        # persistent loop ("shipped+pdl+l2"); logs/s53_run0
    timeout 200 python3 benchmarks/probe_pdl_preload.py --l2-ahead --shapes 1b 8b --table-as "NVIDIA H200" \
      --out "$OUT/pdl_l2_ahead_1.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -26
    timeout 170 python3 benchmarks/probe_pdl_preload.py --shipped-only --shapes 1b --table-as "NVIDIA H200" \
      --out "$OUT/pdl_shipped_l2_1b.json" 2>&1 | grep -v Warn | grep -v '^{' | cut -c1-160 | tail -62 ;;
  s53b)  # (session 53) the graphed 1B decode step with this tree and with benchmarks/_old (the commit before k/v left
         # out of the q/k/v's output: git archive 32edc96 fusion_passes); run twice, new/old then old/new (s53_run1)
    decode_step_new_old s53 150 110 ;;
  s53c)  # (session 53) --room: the 1B q/k/v's PDL twin with 1 or 2 blocks before the wait, at the shipped and lowered
         # register caps, with each compile's registers (does a twin gain only where the next kernel's programs fit?)
    timeout 200 python3 benchmarks/probe_pdl_preload.py --room --table-as "NVIDIA H200" \
      --out "$OUT/pdl_room.json" 2>&1 | grep -v Warn | grep -v '^{' | tail -24 ;;
  s54)  # (session 54; run 2: runs 0-1 ran earlier forms of the probe, with the o) design 25: the 1B q/k/v with each
         # program's weight share staged in shared memory by TMA before the PDL wait (Gluon), against the shipped PDL
         # twins and the read floor, then in the layer chain
    FUSION_PASSES_GEMV_TABLE_DEVICE="NVIDIA H200" timeout 450 python3 benchmarks/probe_smem_gemv.py --layer --linears qkv --out "$OUT/smem_gemv.json" 2>&1 | grep -v Warn | tail -70 ;;
  s55)  # (session 55; run 0; runs 1-2 ran the probe as below with --variants 01 11, and --layer --variants 01) design
         # 26: design 25's kernel with the q/k/v rows interleaved once per head (RoPE's pairs in one TMA box) and / or
         # every block's cos / sin requested right after the wait; kv form, the layer, then the norm form
    FUSION_PASSES_GEMV_TABLE_DEVICE="NVIDIA H200" timeout 540 python3 benchmarks/probe_smem_gemv.py --layer --linears qkv \
      --variants ${S55_VARIANTS:-11 10} --out "$OUT/smem_gemv.json" 2>&1 | grep -v Warn | tail -90 ;;
  s56)  # (session 56; run 0 on b4f0c66's tree, whose probe also timed fusion_passes' layer through hooks since
         # removed) design 27: GEMVs that wait on the previous kernel's program count (a counter each program
         # adds itself to after its stores) instead of griddepcontrol.wait; per linear of the 1B, and the layer
    FUSION_PASSES_GEMV_TABLE_DEVICE="NVIDIA H200" timeout 540 python3 benchmarks/probe_flag_wait.py ${S56_ARGS:-} \
      --out "$OUT/flag_wait.json" 2>&1 | grep -v Warn | tail -150 ;;
  s56b)  # (session 56) the PDL twins of the 1B layer (H200 table) in a graphed chain against the plain ops
    python3 -m pytest -q -m gpu tests/kernels/test_gemv_kernel.py -k chain_in_a_cuda_graph 2>&1 | tail -15 ;;
  s59)  # (session 59, logs/s59_run1) design 28: the 1B q/k/v with one program an SM holding its whole share (24
         # rows, 255 registers: the next kernel's program fits beside) against 8-16 rows a program, bare and with the norm
    timeout 400 python3 benchmarks/probe_whole_share.py --out "$OUT/whole_share.json" 2>&1 | grep -v Warn | tail -22 ;;
  s60)  # (session 60) design 29: the late norm (1/rms after the dots) in the persistent / PDL form too: the GEMV
         # kernel's CUDA tests, then the shipped GEMVs per linear and the q/k/v in the step's form, exact vs late
    timeout 200 python3 -m pytest -q -n 4 -p no:cacheprovider tests/kernels/test_gemv_kernel.py \
      > "$OUT/gemv_kernel_tests.log" 2>&1; tail -3 "$OUT/gemv_kernel_tests.log"
    for norm in exact late; do
      FUSION_PASSES_GEMV_NORM=$norm shipped_pdl_gemvs "$norm" --table-as "NVIDIA H200"
    done ;;
  s61)  # (session 61) greedy parity of design 29's late norm (owed since session 60): 64 tokens, seeded random 1B,
         # both attentions, ours as shipped and with FUSION_PASSES_GEMV_NORM=late, CUDA graphs
    timeout "${LIMIT:-540}" python3 benchmarks/generation_parity.py --attn eager sdpa \
      --variants fusion_passes+cudagraphs fusion_passes+normlate+cudagraphs --out "$OUT/parity_normlate.json" 2>&1 \
      | grep -v Warn | tail -12 ;;
  s64)  # (session 64) on an H200 only (else it stops at once): the shipped code with PDL, default since session 48 and
         # measured on H100s only: 1B and 8B decode (uncompiled, stock with CUDA graphs, ours with the graphed step;
         # eager attention), then the chain per linear (as headline); s64_gemv: each GEMV with PDL, its own table
    nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { nvidia-smi -L; echo "not an H200: stop"; exit 0; }
    headline_runs s64 ;;
  s64_gemv)  # (session 64) each shipped GEMV with PDL and plain, and the q/k/v in the step's form, 1B and 8B, this GPU's table
    shipped_pdl_gemvs s64 ;;
  overhead)
    python3 benchmarks/decode_overhead.py --out "$OUT/decode_overhead.json" 2>&1 | grep -v Warn | tail -70 ;;
  *) echo "usage: $0 tests|tests1|tests2|decode|profile|prefill|kernels|gemv|decode8b|prefill_cg|prefill8b|prefill_b8|decode_rope|decode_nocg|prefill8b_rest|prefill8b_cg|decode8b_eager|decode_nocg8b|inline_tests|inline|kv_tests|kv|kv_bench|combo|code|profile_kv|final|graphs|generate|table|configs|persist|prefill_host|host_ops|paired_prefill|paired_parts|paired_nopack_cg|paired_nopack|profile_prefill|sdpa_forms|sdpa_prefill|sdpa_prefill_rest|sdpa_prefill8b|padded|chain|design|diag_generate|kernel_tests|normlate|validate1|validate2|validate3|validate4|validate5|l2pf|ncu|constdims|s26|kvsweep|s26_final|regcap|overhead|peers|pdl|s46_tests|s46_decode|s46_all|s47|s47b|s47c|s48|s48b|s48c|qkv_parts|s49|s49b|s49c|s50|s50b|s50c|s50d|s50mma|s51|s51b|s51c|s52|s52b|s53|s53b|s53c|s54|s55|s56|s56b|s59|s60|s61|s64|s64_gemv" >&2
     exit 2 ;;
esac
