"""End-to-end LLM benchmark: a real transformers Llama (random weights, built from a config), side by side.

    python benchmarks/bench_e2e.py                              # GPU: llama-1b, eager+sdpa attention, all workloads
    python benchmarks/bench_e2e.py --model llama-8b --workloads decode-1024
    python benchmarks/bench_e2e.py --tiny                       # CPU smoke run of the harness (CI)
    python benchmarks/bench_e2e.py --workloads padded-512 --batches 8  # prompts of unequal length (attention_mask)
    python benchmarks/bench_e2e.py --workloads decode-1024 --decode-batches 4 16  # decode of 4 / 16 sequences at once
    python benchmarks/bench_e2e.py --workloads prefill-512 --variants stock fusion_passes --rounds 20 --iters 10 \
        --control                                               # paired: alternating rounds, ratios per round,
                                                                # stock twice for the run's noise

Variants in one run: ``eager``, ``stock`` (torch.compile, Inductor), ``fusion_passes``, ``fusion_passes+rope`` /
``fusion_passes+norope`` (decode_gemv's RoPE epilogue forced on / off; it is on by default),
``fusion_passes+inline`` (the decode attention kernel traced into Inductor's code), each decode variant also
``+cudagraphs`` (``mode="reduce-overhead"``) on GPU. Peers on the same model code: ``stock+freeze`` (Inductor's own
inference passes, ``freezing=True``: constant folding and its concat-linear packing of q/k/v and gate/up), ``liger``
(Liger-Kernel's HF patches: its RMSNorm, RoPE and SwiGLU / GeGLU Triton kernels; GPU only, ``pip install
liger-kernel``) uncompiled and ``liger+stock`` under stock torch.compile. Figures per record: median latency (CUDA
events or wall clock), kernels per step (profiler), peak memory, compile time, graphs compiled and graph breaks, max
error vs eager, and for decode the fraction of the HBM roofline (weight bytes / time / measured copy bandwidth;
``roofline_kv_frac`` adds the KV cache's bytes that the step's attention reads, which grow with the batch: at 1024
context a Llama-1B sequence's cache is 32 MiB, so 16 sequences read 0.5 GiB beside 2.5 GB of weights). Prints a
table; writes ``benchmarks/results/<device>_<torch>.json`` (records are merged by (model, attn, workload, variant)).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import os
import sys
import time
import traceback
import warnings

warnings.filterwarnings("ignore", message=".*past_key_values.*deprecated")

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import env_set, environment, median_ms, pipelined_ms, results_path, save_records  # noqa: E402
from fusion_passes.kernels import packed_linear  # noqa: E402

CONFIGS = {
    # hidden, layers, heads, kv heads, ffn, vocab
    "llama-1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                     intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True),
    "llama-8b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                     intermediate_size=14336, vocab_size=128256, tie_word_embeddings=False),
    # Qwen2.5-1.5B's shape: q/k/v with biases, 2 KV heads of 128, a 152K vocabulary (a real Qwen2ForCausalLM)
    "qwen2-1.5b": dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                       intermediate_size=8960, vocab_size=151936, tie_word_embeddings=True, arch="qwen2"),
    # Gemma-2B's shape: GeGLU MLP, (1 + w) RMSNorm, one KV head of 256
    "gemma-2b": dict(hidden_size=2048, num_hidden_layers=18, num_attention_heads=8, num_key_value_heads=1,
                     head_dim=256, intermediate_size=16384, vocab_size=256000, tie_word_embeddings=True,
                     arch="gemma"),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=256, tie_word_embeddings=True),
    "tiny-qwen2": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       intermediate_size=128, vocab_size=256, tie_word_embeddings=True, arch="qwen2"),
    "tiny-gemma": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                       head_dim=16, intermediate_size=128, vocab_size=256, tie_word_embeddings=True, arch="gemma"),
}


def build_model(name: str, attn: str, device: str, dtype: torch.dtype):
    """A real transformers model of ``CONFIGS[name]``'s shape (Llama unless its ``arch`` says qwen2 or gemma),
    random weights (seed 0), in ``dtype`` on ``device``."""
    import transformers

    kw = dict(CONFIGS[name])
    arch = {"llama": "Llama", "qwen2": "Qwen2", "gemma": "Gemma"}[kw.pop("arch", "llama")]
    cfg = getattr(transformers, f"{arch}Config")(**kw, max_position_embeddings=4096, rms_norm_eps=1e-5,
                                                 attn_implementation=attn)
    torch.manual_seed(0)
    with torch.device(device):
        model = getattr(transformers, f"{arch}ForCausalLM")(cfg).to(dtype).eval()
    return model


def workload_inputs(model, workload: str, batch: int, device: str):
    """A factory: each call returns a fresh ``step(m) -> logits`` for ``workload``.

    Decode prefills a fresh HF StaticCache to the context length with the eager model, then each step decodes one
    token. Some transformers releases advance the cache on every call, so the cache has room for the timed steps
    and each variant gets its own freshly prefilled cache: its first step is compared with eager's first step.
    """
    kind, n = workload.split("-")
    n = int(n)
    vocab = model.config.vocab_size
    g = torch.Generator(device="cpu").manual_seed(1)
    if kind == "prefill":
        ids = torch.randint(0, vocab, (batch, n), generator=g).to(device)
        return lambda: (lambda m: m(input_ids=ids, use_cache=False).logits)
    if kind == "padded":  # prompts of unequal length, right-padded: row i has n - i * n // (2 * batch) tokens
        ids = torch.randint(0, vocab, (batch, n), generator=g).to(device)
        keep = torch.arange(n) < torch.tensor([n - i * n // (2 * batch) for i in range(batch)])[:, None]
        mask = keep.long().to(device)  # right padding leaves no query row without a key (left padding would)
        return lambda: (lambda m: m(input_ids=ids, attention_mask=mask, use_cache=False).logits)
    from transformers import StaticCache

    from fusion_passes.zoo import hf_cache_kwargs

    ctx = torch.randint(0, vocab, (batch, n), generator=g).to(device)
    tok = torch.randint(0, vocab, (batch, 1), generator=g).to(device)
    pos = torch.tensor([n], device=device)

    def fresh():
        cache = StaticCache(config=model.config, max_cache_len=n + 256)
        kw = hf_cache_kwargs(model, cache)  # once: the step below is what the benchmarks time
        with torch.no_grad():
            model(input_ids=ctx, **kw, cache_position=torch.arange(n, device=device), use_cache=True)
        return lambda m: m(input_ids=tok, **kw, cache_position=pos,
                           position_ids=pos[None].expand(batch, 1), use_cache=True).logits

    return fresh


def stock_compile(model, mode: str | None, options: dict):
    """``torch.compile`` with Inductor as it ships, in ``mode``, with ``options`` (a variant's suffixes)."""
    if options:  # torch.compile takes a mode or options, not both: the mode's options go in with ours
        from torch._inductor import list_mode_options

        return torch.compile(model, options={**(list_mode_options(mode) if mode else {}), **options})
    return torch.compile(model, mode=mode)


def make_variant(model, variant: str):
    import fusion_passes

    cudagraphs = variant.endswith("+cudagraphs")
    base = variant.removesuffix("+cudagraphs").split("+")[0]
    mode = "reduce-overhead" if cudagraphs else None
    options = inductor_options(variant)  # an unknown suffix raises here, before a compile
    torch._dynamo.reset()
    if base == "eager":
        return model
    if base == "stock":
        return stock_compile(model, mode, options)
    if base == "liger":
        if cudagraphs and "+stock" not in variant:
            raise ValueError(f"unknown variant {variant!r}: the uncompiled liger has no CUDA graphs; "
                             "liger+stock+cudagraphs compiles it")
        patched = liger_model(model)
        return stock_compile(patched, mode, options) if "+stock" in variant else patched
    if base == "fusion_passes":
        forced_policies(variant)
        parts = variant.removesuffix("+cudagraphs").split("+")
        exclude = [EXCLUDE_SUFFIXES[p] for p in parts if p in EXCLUDE_SUFFIXES]
        graphs = next((GRAPH_SUFFIXES[p] for p in parts if p in GRAPH_SUFFIXES), None)
        return torch.compile(model, backend=fusion_passes.backend(mode=mode, options=options or None, exclude=exclude,
                                                                  cudagraphs=graphs))
    raise ValueError(f"unknown variant {variant!r}")


# Suffixes that set Inductor options (stock or ours): "combo" fuses independent small kernels into one launch
# (Inductor's combo kernels; a decode step has many tiny ones, e.g. HF's per-layer cache counters).
# "freeze" is Inductor's own inference mode (the peer "Inductor's own passes"): parameters folded as constants, and
# its concat-linear pass packs the 2-3 linears that share an input (q/k/v, gate/up), which it does only then.
INDUCTOR_SUFFIXES = {"combo": {"combo_kernels": True}, "freeze": {"freezing": True}}
# Suffixes of ours that leave one family out: "nostate" keeps HF's per-layer counter updates as separate kernels;
# "nopack" and "noattn" leave the q/k/v + gate/up packing and the attention rewrite out.
EXCLUDE_SUFFIXES = {"nostate": "state_updates", "nopack": "qkv_packing", "noattn": "attention_sdpa"}
# Suffixes of ours that pick the CUDA graphs: "static" replays each graph as one raw CUDA graph
# (fusion_passes.static_cudagraphs) instead of Inductor's cudagraph trees: use it without "+cudagraphs"
GRAPH_SUFFIXES = {"static": "static"}
# "graphstep": the whole step call (Dynamo, HF's Python, the compiled graph without graphs of its own) replayed as
# one CUDA graph by fusion_passes.cuda_graph_step; the step's inputs are fixed, so no input is copied per call
STEP_SUFFIXES = ("graphstep",)


def inductor_options(variant: str) -> dict:
    """The Inductor options a variant's suffixes set; a suffix its base does not take is a ValueError."""
    name, *parts = variant.removesuffix("+cudagraphs").split("+")
    if name != "fusion_passes":
        takes = [*INDUCTOR_SUFFIXES, *(["stock"] if name == "liger" else [])]
        unknown = [p for p in parts if p not in takes]
        if unknown:
            raise ValueError(f"unknown variant {variant!r}: {name} takes only {', '.join(takes)}")
    return {k: v for p in parts if p in INDUCTOR_SUFFIXES for k, v in INDUCTOR_SUFFIXES[p].items()}


def forced_policies(variant: str) -> dict[str, str]:
    """The family policies a ``fusion_passes+<suffix>...`` variant forces: environment variable -> value
    (none for other variants); an unknown suffix is a ValueError."""
    from fusion_passes.kernels import gemv_table, pdl
    from fusion_passes.patterns import attention_sdpa, decode_gemv, qkv_packing

    suffixes = {
        "rope": (decode_gemv.ROPE_POLICY_ENV, "on"),  # RoPE folded into the q/k GEMV (the default)
        "norope": (decode_gemv.ROPE_POLICY_ENV, "off"),
        "inline": (attention_sdpa.INLINE_POLICY_ENV, "on"),  # decode attention traced into Inductor's code (default)
        "noinline": (attention_sdpa.INLINE_POLICY_ENV, "off"),  # ... or an extern op
        "kv": (decode_gemv.KV_WRITE_POLICY_ENV, "on"),  # the KV-cache update in the q/k/v GEMV's epilogue
        "nokv": (decode_gemv.KV_WRITE_POLICY_ENV, "off"),
        "table": (gemv_table.POLICY_ENV, "on"),  # M = 1 GEMVs run gemv_table's measured configs (the default)
        "notable": (gemv_table.POLICY_ENV, "off"),  # ... or are autotuned in place
        "tiled": (gemv_table.POLICY_ENV, "tiled"),  # ... or run its tiled entries, none of the persistent ones
        "normlate": (gemv_table.NORM_POLICY_ENV, "late"),  # M = 1 GEMVs with a norm: 1/rms after the dot
        "l2pf": (attention_sdpa.PREFETCH_POLICY_ENV, "on"),  # decode attention requests the o-proj weight into L2
        "packdecode": (qkv_packing.DECODE_POLICY_ENV, "packed"),  # decode-sized groups cuBLAS runs: all packed
        "unpackdecode": (qkv_packing.DECODE_POLICY_ENV, "unpacked"),  # ... none (before session 30: 2-16 rows too)
        "pdl": (pdl.POLICY_ENV, "auto"),  # decode kernels launched with PDL where compiled for CUDA graphs
        "nopdl": (pdl.POLICY_ENV, "off"),  # ... never (the default)
        "pdl2": (pdl.POLICY_ENV, "auto"),  # ... with PDL, two blocks before the wait (probe_pdl_preload's PRELOAD2)
        "pdlplain": (pdl.POLICY_ENV, "auto"),  # ... with PDL, the plain launches' entries (no PDL_PERSISTENT)
        "h200table": (gemv_table.DEVICE_POLICY_ENV, "NVIDIA H200"),  # the H200's GEMV configs on any GPU
        "owntable": (gemv_table.DEVICE_POLICY_ENV, "own"),  # the GPU's own (an H100 SXM: none, so autotuned)
    }
    name, *parts = variant.removesuffix("+cudagraphs").split("+")
    if name != "fusion_passes":
        return {}
    known = [*suffixes, *INDUCTOR_SUFFIXES, *EXCLUDE_SUFFIXES, *GRAPH_SUFFIXES, *STEP_SUFFIXES]
    unknown = [p for p in parts if p not in known]
    if unknown:
        raise ValueError(f"unknown variant {variant!r}: no suffix {', '.join(unknown)} (known: {', '.join(known)})")
    return dict(suffixes[p] for p in parts if p in suffixes)


def variant_env(variant: str):
    """``fusion_passes+<suffix>``: ours with the policies of ``forced_policies`` set (the passes read them while
    they compile, so they are set for the variant's whole measurement); ``liger...``: transformers' modeling
    modules restored afterwards (Liger patches them); other variants run with the environment as it is. ``+pdl2``
    / ``+pdlplain`` also change ``gemv_table``'s persistent entries as ``probe_pdl_preload``'s ``shipped+pdl2`` /
    ``shipped+pdl-plain`` do (read per launch by the PDL twins, which are extern ops: no compiled code caches it)."""
    if variant.split("+")[0] == "liger":
        return modeling_modules_restored()
    parts = variant.removesuffix("+cudagraphs").split("+")[1:]
    if "pdl2" in parts or "pdlplain" in parts:
        from probe_pdl_preload import shipped_tables  # the probe's "+pdl2" / "+pdl-plain" tables

        stack = contextlib.ExitStack()
        stack.enter_context(env_set(forced_policies(variant)))
        stack.enter_context(shipped_tables("preload2" if "pdl2" in parts else "nopdlentries", ""))
        return stack
    return env_set(forced_policies(variant))


# the transformers modules of CONFIGS' architectures, which Liger-Kernel patches (functions, classes) in place
MODELING_MODULES = ("llama.modeling_llama", "qwen2.modeling_qwen2", "gemma.modeling_gemma")


@contextlib.contextmanager
def modeling_modules_restored():
    """Within the block a variant may patch transformers' modeling modules (Liger replaces their RoPE function and
    norm / MLP classes); on leaving, every name they held is set back and every name added is removed, so the
    variants measured next run HF's own code."""
    import importlib

    modules = [importlib.import_module(f"transformers.models.{name}") for name in MODELING_MODULES]
    saved = [dict(vars(m)) for m in modules]
    try:
        yield
    finally:
        for module, names in zip(modules, saved):
            for name in set(vars(module)) - set(names):
                delattr(module, name)
            for name, value in names.items():
                if vars(module).get(name) is not value:
                    setattr(module, name, value)


def liger_model(model):
    """A copy of ``model`` with Liger-Kernel's HF patches (RMSNorm, RoPE, SwiGLU / GeGLU; no loss patches: the
    forward stays the model's), as ``liger_kernel.transformers`` applies them to a loaded model. Its kernels are
    Triton GPU kernels: CPU and a missing package are errors naming the fix."""
    if not next(model.parameters()).is_cuda:
        raise RuntimeError("the liger variants need a CUDA device: Liger-Kernel's kernels are Triton GPU kernels")
    try:
        from liger_kernel.transformers import _apply_liger_kernel_to_instance
    except ImportError as e:
        raise RuntimeError("the liger variants need Liger-Kernel: pip install liger-kernel") from e
    patched = copy.deepcopy(model)  # Liger rebinds the instance's modules' forwards in place
    _apply_liger_kernel_to_instance(patched, rope=True, rms_norm=True, swiglu=True, geglu=True, cross_entropy=False,
                                    fused_linear_cross_entropy=False)
    return patched


def count_kernels(fn, device: str) -> int | None:
    if not device.startswith("cuda"):
        return None
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def kv_cache_bytes(config, batch: int, context: int, dtype) -> int:
    """The K and V bytes a decode step's attention reads: ``context`` positions of every layer's KV heads for each
    of ``batch`` sequences."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    per_token = 2 * config.num_hidden_layers * kv_heads * head_dim * torch.finfo(dtype).bits // 8
    return batch * context * per_token


def copy_bandwidth_gbs(device: str) -> float | None:
    """Measured device-to-device copy bandwidth (bytes read + written per second): the HBM traffic rate the
    decode roofline divides the weight bytes by."""
    if not device.startswith("cuda"):
        return None
    src = torch.empty(2 * 1024**3, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), device, iters=20)
    return 2 * src.numel() / (ms * 1e-3) / 1e9


def run(args, save) -> list[dict]:
    """Measure every (attn, workload, batch, variant); ``save(records)`` after each, so a run cut short keeps
    what it measured. Past ``args.budget_s`` seconds the remaining variants are recorded as skipped."""
    started = time.perf_counter()
    device = args.device
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    bw = copy_bandwidth_gbs(device)
    records = []
    for attn in args.attn:
        model = build_model(args.model, attn, device, dtype)
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        for workload in args.workloads:
            for batch in args.decode_batches if workload.startswith("decode") else args.batches:
                fresh_step = workload_inputs(model, workload, batch, device)
                with torch.no_grad():
                    reference = fresh_step()(model).float()
                if args.rounds:
                    base = dict(model=args.model, attn=attn, workload=workload, batch=batch,
                                copy_bw_gbs=round(bw, 1) if bw else None)
                    print(f"[bench] {attn} {workload} b{batch} paired: {' '.join(args.variants)}", file=sys.stderr,
                          flush=True)
                    records += [{**base, **r} for r in measure_paired(model, fresh_step, list(args.variants),
                                                                       reference, device, args.rounds, args.iters,
                                                                       control=args.control)]
                    save(records)
                    continue
                for variant in args.variants:
                    if variant.endswith("+cudagraphs") and not device.startswith("cuda"):
                        continue
                    rec = dict(model=args.model, attn=attn, workload=workload, batch=batch, variant=variant,
                               copy_bw_gbs=round(bw, 1) if bw else None)
                    print(f"[bench] {attn} {workload} b{batch} {variant}", file=sys.stderr, flush=True)
                    if args.budget_s and time.perf_counter() - started > args.budget_s:
                        rec["error"] = "skipped: time budget spent"
                        records.append(rec)
                        continue
                    try:
                        with variant_env(variant):
                            rec.update(measure(model, fresh_step(), variant, reference, device, args.iters,
                                               decode=workload.startswith("decode")))
                    except Exception as e:  # noqa: BLE001 - a failing variant is a result, not a crash
                        traceback.print_exc()
                        rec["error"] = f"{type(e).__name__}: {e}"[:500]
                    if workload.startswith("decode") and bw and rec.get("median_ms"):
                        seconds = rec["median_ms"] * 1e-3
                        rec["roofline_frac"] = round(weight_bytes / seconds / (bw * 1e9), 3)
                        kv = kv_cache_bytes(model.config, batch, int(workload.split("-")[1]), dtype)
                        rec["roofline_kv_frac"] = round((weight_bytes + kv) / seconds / (bw * 1e9), 3)
                    records.append(rec)
                    save(records)
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return records


def step_for(variant: str, step):
    """``step(model)`` as ``variant`` runs it: with CUDA graphs each call is marked as a new step (the last
    step's graph outputs may then be overwritten, which is what a generation loop allows)."""
    if "+graphstep" in variant:
        import fusion_passes

        graphed = {}

        def whole(m):
            if id(m) not in graphed:
                graphed[id(m)] = fusion_passes.cuda_graph_step(lambda: step(m))
            return graphed[id(m)]()

        whole.graphed = graphed  # model id -> GraphedStep (probe_graph_floor replays its graph bare)
        return whole
    if not variant.endswith("+cudagraphs"):
        return step

    def marked(m):
        torch.compiler.cudagraph_mark_step_begin()
        return step(m)

    return marked


def first_calls(step, compiled, device, reference) -> dict:
    """The first call (it compiles: ``compile_s``, and its ``max_err`` against ``reference``), then two more
    (cudagraph trees record on the 2nd / 3rd call)."""
    t0 = time.perf_counter()
    out = step(compiled).float().clone()  # cloned: later CUDA-graph replays reuse the output buffer
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    first = dict(compile_s=round(time.perf_counter() - t0, 2), max_err=float((out - reference).abs().max()))
    for _ in range(2):
        step(compiled)
    return first


def measure(model, step, variant, reference, device, iters, decode=False) -> dict:
    import fusion_passes

    from torch._dynamo.utils import counters

    compiled = make_variant(model, variant)
    step = step_for(variant, step)
    graphs, breaks = counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())
    with torch.no_grad(), fusion_passes.capture() as recs:
        first = first_calls(step, compiled, device, reference)
        # what Dynamo made of the step: a peer's kernels it cannot trace split it into graphs run one by one
        first.update(graphs=counters["stats"]["unique_graphs"] - graphs,
                     graph_breaks=sum(counters["graph_break"].values()) - breaks)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        ms = median_ms(lambda: step(compiled), device, iters=iters)
        # decode: also the steady rate when the host runs ahead (one sync per `iters` steps), which the
        # synchronised median above hides behind the host's per-step overhead
        pipelined = None
        if decode and device.startswith("cuda"):
            pipelined = pipelined_ms(lambda: step(compiled), device, iters)
        peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
        kernels = count_kernels(lambda: step(compiled), device)
    fired: dict[str, int] = {}
    for r in recs:
        for m in r.matches:
            fired[m.pattern] = fired.get(m.pattern, 0) + 1
            if m.detail.get("launch") == "pdl":  # GEMVs run as their PDL twins (FUSION_PASSES_PDL)
                fired["launch=pdl"] = fired.get("launch=pdl", 0) + 1
    return dict(
        median_ms=round(ms, 4),
        pipelined_ms=round(pipelined, 4) if pipelined is not None else None,
        kernels=kernels,
        peak_mem_gib=round(peak, 3) if peak is not None else None,
        **first,
        matches=fired,
        errors=[e.error for r in recs for e in r.errors],
    )


CONTROL = " (control)"


def measure_paired(model, fresh_step, variants, reference, device, rounds, iters, control=False) -> list[dict]:
    """The variants timed in alternating rounds, for comparisons the run-to-run noise of one measurement each would
    hide (a host-bound step moves by more than the difference between two variants from one machine start to the
    next). All are compiled first and stay compiled together (Dynamo keeps one cache entry per backend); then each
    round times every variant (``median_ms`` of ``iters`` calls), forward and reverse order by turns. Per variant:
    the median of its rounds, each round's median, and against the first variant the median of the per-round
    ratios and the rounds it was faster in. ``recompiles`` counts graphs compiled during the rounds (0, or the
    rounds did not time what they name); ``packed_linear_paths`` counts the paths our packed GEMM took in them
    (only "packed" in a steady state: "repacked" or "unpacked" there is host work of its own). ``control``: the
    first variant is compiled a second time and timed as one more, "<first> (control)": the same code, so its
    ratio to the first is this run's noise."""
    from torch._dynamo.utils import counters

    if any(v.split("+")[0] == "liger" for v in variants):  # its module patches would run under every variant
        raise ValueError("the liger variants are measured one after the other, not in paired rounds (--rounds)")
    variants = [v for v in variants if device.startswith("cuda") or not v.endswith("+cudagraphs")]
    variants += [variants[0] + CONTROL] if control else []
    # every make_variant first: each resets Dynamo, which would drop a compile done before it
    compiled = {v: (make_variant(model, v.removesuffix(CONTROL)), step_for(v.removesuffix(CONTROL), fresh_step()))
                for v in variants}
    recs = {}
    for v, (m, step) in compiled.items():
        with variant_env(v.removesuffix(CONTROL)), torch.no_grad():
            recs[v] = dict(variant=v, **first_calls(step, m, device, reference))
    graphs_before = counters["stats"]["unique_graphs"]
    times = {v: [] for v in variants}
    paths = {v: collections.Counter() for v in variants}
    for r in range(rounds):
        for v in variants if r % 2 == 0 else variants[::-1]:
            m, step = compiled[v]
            before = collections.Counter(packed_linear.STATS)
            with variant_env(v.removesuffix(CONTROL)), torch.no_grad():
                times[v].append(median_ms(lambda: step(m), device, iters=iters, warmup=1))
            paths[v] += collections.Counter(packed_linear.STATS) - before
    recompiles = counters["stats"]["unique_graphs"] - graphs_before
    first = times[variants[0]]
    for v in variants:
        ratios = sorted(t / f for t, f in zip(times[v], first))
        recs[v].update(median_ms=round(sorted(times[v])[len(first) // 2], 4), rounds=len(first),
                       round_ms=[round(t, 4) for t in times[v]], vs_first=variants[0],
                       ratio_to_first=round(ratios[len(ratios) // 2], 4),
                       faster_rounds=sum(t < f for t, f in zip(times[v], first)), recompiles=recompiles,
                       packed_linear_paths=dict(paths[v]))
    return list(recs.values())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-1b", choices=sorted(CONFIGS))
    p.add_argument("--attn", nargs="+", default=["eager", "sdpa"])
    p.add_argument("--workloads", nargs="+", default=["prefill-512", "prefill-2048", "decode-1024"])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8],
                   help="prompt batch sizes (prefill and padded workloads)")
    p.add_argument("--decode-batches", nargs="+", type=int, default=[1],
                   help="sequences decoded at once (decode workloads; M = batch rows per linear)")
    p.add_argument("--variants", nargs="+", default=["eager", "stock", "fusion_passes", "stock+cudagraphs",
                                                      "fusion_passes+cudagraphs"])
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--rounds", type=int, default=0,
                   help="time the variants against each other in this many alternating rounds of --iters calls "
                        "each (measure_paired), instead of one after the other")
    p.add_argument("--control", action="store_true",
                   help="with --rounds: the first variant twice (compiled twice), to show the run's noise")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--budget-s", type=float, default=0, help="stop starting new variants after this many seconds")
    p.add_argument("--tiny", action="store_true", help="CPU smoke run: tiny config, short workloads")
    p.add_argument("--out", default=None, help="JSON path (default benchmarks/results/<device>_<torch>.json)")
    args = p.parse_args(argv)
    if args.tiny:  # a tiny-* model given (tiny-qwen2) stays
        args.model = args.model if args.model.startswith("tiny") else "tiny"
        args.batches, args.iters = [2], 3
        if args.workloads == p.get_default("workloads"):
            args.workloads = ["prefill-32", "decode-32"]
    from tabulate import tabulate

    path = args.out or results_path("e2e", args.device)
    records = run(args, lambda recs: save_records(recs, path, key=("model", "attn", "workload", "batch", "variant"),
                                                   device=args.device))
    cols = ["model", "attn", "workload", "batch", "variant", "median_ms", "pipelined_ms", "kernels", "peak_mem_gib",
            "compile_s", "graphs", "graph_breaks", "max_err", "roofline_frac", "roofline_kv_frac", "matches", "error"]
    if args.rounds:
        cols = ["model", "attn", "workload", "batch", "variant", "median_ms", "ratio_to_first", "faster_rounds",
                "rounds", "recompiles", "compile_s", "max_err"]
    print(tabulate([[r.get(c, "") for c in cols] for r in records], headers=cols))
    print(f"\n{environment(args.device)}\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
