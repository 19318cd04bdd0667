"""CPU smoke test of the benchmark harness: it runs, and its JSON has the fields results are compared by."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_e2e  # noqa: E402

from tests.kernels import interpreter_blocker  # noqa: E402

FIELDS = {"model", "attn", "workload", "variant", "median_ms", "kernels", "peak_mem_gib", "compile_s", "max_err"}


def test_e2e_harness_tiny_cpu(tmp_path):
    out = tmp_path / "res.json"
    assert bench_e2e.main(["--tiny", "--device", "cpu", "--attn", "eager", "--workloads", "decode-16", "--variants", "eager",
                           "stock+freeze", "fusion_passes", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"device", "torch", "triton", "transformers", "liger_kernel"} <= set(data["environment"])
    recs = data["records"]
    assert [r["variant"] for r in recs] == ["eager", "stock+freeze", "fusion_passes"]
    for r in recs:
        assert FIELDS <= set(r) and "error" not in r, r
        assert r["median_ms"] > 0 and r["max_err"] < 1e-3
    assert [(r["graphs"], r["graph_breaks"]) for r in recs] == [(0, 0), (1, 0), (1, 0)]


def test_e2e_decode_of_several_sequences_tiny_cpu(tmp_path):
    """--decode-batches: the decode step of 2 sequences at once, each variant against eager's first step."""
    out = tmp_path / "res.json"
    assert bench_e2e.main(["--tiny", "--device", "cpu", "--attn", "eager", "--workloads", "decode-16",
                           "--decode-batches", "1", "2", "--variants", "eager", "fusion_passes", "--out",
                           str(out)]) == 0
    recs = json.loads(out.read_text())["records"]
    assert [(r["batch"], r["variant"]) for r in recs] == [(1, "eager"), (1, "fusion_passes"), (2, "eager"),
                                                          (2, "fusion_passes")]
    assert all("error" not in r and r["max_err"] < 1e-3 for r in recs), recs


def test_kv_cache_bytes_of_a_decode_step():
    """The Llama-1B shape: 16 layers x 8 KV heads of 64, bf16: 32 MiB per sequence at 1024 positions."""
    from types import SimpleNamespace

    cfg = SimpleNamespace(**bench_e2e.CONFIGS["llama-1b"])  # no head_dim: hidden / heads, as HF derives it
    assert bench_e2e.kv_cache_bytes(cfg, 1, 1024, torch.bfloat16) == 32 * 2**20
    assert bench_e2e.kv_cache_bytes(cfg, 16, 1024, torch.float32) == 16 * 64 * 2**20


def test_e2e_padded_prompts_tiny_cpu(tmp_path, monkeypatch):
    """``padded-N``: a batch of prompts of unequal length, right-padded, through the model's attention_mask (the
    mask SDPA keeps); ours matches eager there."""
    calls = []
    build = bench_e2e.build_model

    def spy(*a, **kw):
        model = build(*a, **kw)
        forward = model.forward
        model.forward = lambda *fa, **fkw: calls.append(fkw.get("attention_mask")) or forward(*fa, **fkw)
        return model

    monkeypatch.setattr(bench_e2e, "build_model", spy)
    out = tmp_path / "res.json"
    assert bench_e2e.main(["--tiny", "--device", "cpu", "--attn", "sdpa", "--workloads", "padded-16", "--batches",
                           "2", "--variants", "eager", "fusion_passes", "--out", str(out)]) == 0
    recs = json.loads(out.read_text())["records"]
    assert [(r["workload"], r["batch"], r["variant"]) for r in recs] == [("padded-16", 2, "eager"),
                                                                         ("padded-16", 2, "fusion_passes")]
    assert all("error" not in r and r["max_err"] < 1e-3 for r in recs), recs
    assert calls and calls[0].sum(-1).tolist() == [16, 12]  # row 1 lost 16 // 4 tokens


@pytest.mark.parametrize("model", ["tiny-qwen2", "tiny-gemma"])
def test_e2e_harness_builds_qwen2_and_gemma_shapes(tmp_path, model):
    """``arch`` configs build a real Qwen2ForCausalLM (q/k/v biases) or GemmaForCausalLM (GeGLU); ours matches
    eager on them."""
    out = tmp_path / "res.json"
    assert bench_e2e.main(["--tiny", "--model", model, "--device", "cpu", "--attn", "eager", "--workloads",
                           "decode-16", "--variants", "eager", "fusion_passes", "--out", str(out)]) == 0
    recs = json.loads(out.read_text())["records"]
    assert [(r["model"], r["variant"]) for r in recs] == [(model, "eager"), (model, "fusion_passes")]
    assert all("error" not in r and r["max_err"] < 1e-3 for r in recs), recs
    if model == "tiny-gemma":
        big = bench_e2e.build_model("gemma-2b", "eager", "meta", torch.bfloat16)
        assert type(big).__name__ == "GemmaForCausalLM" and big.config.head_dim == 256
        return
    model = bench_e2e.build_model("qwen2-1.5b", "eager", "meta", torch.bfloat16)
    attn = model.model.layers[0].self_attn
    assert type(model).__name__ == "Qwen2ForCausalLM" and attn.q_proj.bias is not None
    assert (attn.q_proj.out_features, attn.k_proj.out_features, len(model.model.layers)) == (1536, 256, 28)


def test_kv_write_bench_tiny_cpu(tmp_path):
    import bench_kv_write

    out = tmp_path / "kv.json"
    assert bench_kv_write.main(["--tiny", "--out", str(out)]) == 0
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["config"] == "autotuned" and rec["plain_us"] > 0 and rec["kv_write_us"] > 0


def run_interpreted(*argv: str, cwd=None) -> str:
    """stdout of ``python *argv`` under TRITON_INTERPRET=1; skips where the interpreter cannot run, fails if the
    script exits non-zero (the probes check their own values and exit so on a mismatch)."""
    if reason := interpreter_blocker():
        pytest.skip(reason)
    run = subprocess.run([sys.executable, *argv], cwd=cwd, env={**os.environ, "TRITON_INTERPRET": "1"},
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return run.stdout


def run_tiny_interpreted(name: str, *args: str) -> str:
    """stdout of ``benchmarks/<name>.py --tiny *args`` (``run_interpreted``)."""
    return run_interpreted(str(BENCHMARKS / f"{name}.py"), "--tiny", *args)


def test_gemv_configs_bench_tiny_interpreted(tmp_path):
    """The config sweep times kernels, so off GPU it needs Triton's interpreter (set before triton is imported)."""

    out = tmp_path / "configs.json"
    run_tiny_interpreted("bench_gemv_configs", "--linears", "o", "qkv_kv", "--out", str(out))
    recs = json.loads(out.read_text())["records"]
    assert [(r["linear"], r["rank"], r["config"]) for r in recs] == [("o", 0, "N4 K32 w4 s2 prefetch"),
                                                                     ("qkv_kv", 0, "N4 K32 w4 s2 prefetch")]
    assert all(r["us"] > 0 for r in recs)
    assert all(0 <= r["max_error"] < 1e-3 for r in recs)  # every config's output checked against the reference


def test_gemv_configs_refuses_a_config_that_computes_something_else(tmp_path):
    """A config whose kernel returns wrong numbers stops the sweep before it can be timed (and win)."""
    script = tmp_path / "wrong_gemv.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
        "import bench_gemv_configs\n"
        "from fusion_passes.kernels import gemv\n"
        "launch = gemv._launch\n"
        "def off_by_one(x, *args, **kwargs):\n"
        "    out = launch(x, *args, **kwargs)\n"
        "    args[9].add_(1.0)  # y, the output\n"
        "    return out\n"
        "gemv._launch = off_by_one\n"
        f"sys.exit(bench_gemv_configs.main(['--tiny', '--linears', 'o', '--out', {str(tmp_path / 'x.json')!r}]))\n")
    run = subprocess.run([sys.executable, str(script)], env={**os.environ, "TRITON_INTERPRET": "1"},
                         capture_output=True, text=True, timeout=600)
    assert run.returncode != 0 and "max error" in run.stderr + run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    assert not (tmp_path / "x.json").exists()


def test_decode_code_lists_the_launches_with_their_source_nodes(tmp_path):
    import decode_code

    generated = "\n".join([
        "triton_poi_fused_le_where_0 = async_compile.triton('triton_poi_fused_le_where_0', '...')",
        "_gemv_kernel_0 = async_compile.triton('_gemv_kernel', '...')",
        "class Runner:",
        "    def call(self, args):",
        "        # Topologically Sorted Source Nodes: [kv_arange, attention_mask], Original ATen: [aten.arange, aten.le]",
        "        stream0 = get_raw_stream(0)",
        "        triton_poi_fused_le_where_0.run(buf0, 16, stream=stream0)",
        "        _gemv_kernel_0.run(buf1, buf2, stream=stream0)",
        "        buf3 = torch.ops.fusion_passes.decode_attention.default(buf1, buf0)",
        "        extern_kernels.mm(buf3, arg1_1, out=buf4)",
    ])
    rows = decode_code.kernel_launches(generated)
    assert [(r["kernel"], r["sources"]) for r in rows] == [
        ("triton_poi_fused_le_where_0", "kv_arange, attention_mask"), ("_gemv_kernel_0", ""),
        ("torch.ops.fusion_passes.decode_attention.default", ""), ("extern_kernels.mm", "")]
    out = tmp_path / "code.json"
    assert decode_code.main(["--tiny", "--device", "cpu", "--out", str(out)]) == 0
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["launches"] == len(rec["kernels"]) > 5
    assert any("packed_linear" in k["kernel"] and "linear" in k["sources"] for k in rec["kernels"])


def test_decode_profile_tiny_cpu(tmp_path):
    import profile_decode

    out = tmp_path / "prof.json"
    assert profile_decode.main(["--tiny", "--device", "cpu", "--variants", "fusion_passes", "--out", str(out)]) == 0
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["variant"] == "fusion_passes" and rec["workload"] == "decode-16"
    shares = [k["share"] for k in rec["kernels"]]
    assert shares == sorted(shares, reverse=True) and abs(sum(shares) - 1) < 0.01
    assert any("packed_linear" in k["kernel"] for k in rec["kernels"])  # the packed projections ran


def test_profile_a_prefill_call_tiny_cpu(tmp_path):
    """``--workload prefill-…``: the same per-kernel profile of a prefill call (at the tiny config, 16 tokens)."""
    import profile_decode

    out = tmp_path / "prof.json"
    assert profile_decode.main(["--tiny", "--device", "cpu", "--variants", "fusion_passes", "--workload",
                                "prefill-512", "--out", str(out)]) == 0
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["workload"] == "prefill-16" and any("packed_linear" in k["kernel"] for k in rec["kernels"])
    assert any("scaled_dot_product" in k["kernel"] for k in rec["kernels"])  # eager attention became SDPA


def test_gemv_bench_tiny_cpu(tmp_path):
    import bench_gemv

    out = tmp_path / "gemv.json"
    assert bench_gemv.main(["--tiny", "--rows", "1", "3", "--variants", "cublas", "ours", "--out", str(out)]) == 0
    recs = json.loads(out.read_text())["records"]
    assert {(r["linear"], r["rows"], r["variant"]) for r in recs} >= {("gate_up", 3, "ours"), ("down", 1, "cublas")}
    ours = [r for r in recs if r["variant"] == "ours"]
    assert ours and all(r["us"] > 0 and r["max_err_vs_fp64"] < 1e-4 for r in ours)  # fp32 on CPU


def test_prefill_kernels_bench_tiny_cpu(tmp_path):
    import bench_prefill_kernels

    out = tmp_path / "prefill.json"
    assert bench_prefill_kernels.main(["--tiny", "--out", str(out)]) == 0
    recs = json.loads(out.read_text())["records"]
    assert {(r["family"], r["variant"]) for r in recs} == {(f, v) for f in ("attention", "qkv") for v in ("stock", "ours")}
    assert all(r["us"] > 0 and r["max_err"] < 1e-4 for r in recs)  # fp32 on CPU: the rewrites' ops match


def test_prefill_kernels_bench_sdpa_forms_tiny_cpu(tmp_path):
    """``--sdpa-forms``: the SDPA calls the rewrite could make (on CPU only PyTorch's own backend choice), each
    matching eager attention and naming the attention op it ran."""
    import bench_prefill_kernels

    out = tmp_path / "prefill.json"
    assert bench_prefill_kernels.main(["--tiny", "--families", "attention", "--sdpa-forms", "--out", str(out)]) == 0
    recs = {r["variant"]: r for r in json.loads(out.read_text())["records"]}
    assert set(recs) == {"stock", "ours", "repeated causal [auto]", "repeated mask [auto]", "gqa mask [auto]"}
    for name, r in recs.items():
        assert "error" not in r and r["us"] > 0 and r["max_err"] < 1e-4, r
        assert (r["kernels"] == []) == (name == "stock"), r  # stock's eager attention runs no SDPA


def test_gemv_design_probe_tiny_interpreted(tmp_path):
    """Every accumulation and norm design of the probe's kernel runs (each checked against eager's math inside)
    and is timed next to the read floor."""

    out = tmp_path / "design.json"
    run_tiny_interpreted("probe_gemv_design", "--linears", "o", "--norms", "0", "1", "2", "--out", str(out))
    recs = json.loads(out.read_text())["records"]
    assert {(r.get("NORM"), r.get("ACC1D"), r.get("PREFETCH")) for r in recs} == {
        *((n, a, p) for n in (0, 1, 2) for a in (False, True) for p in (False, True)), (None, None, None)}
    assert sum(r["config"] == "read" for r in recs) == 1 and all(r["us"] > 0 for r in recs)


def test_split_gemv_probe_designs_match_the_reference_tiny_interpreted():
    """The probe's designs (the tensor-core one with x on either side) compute W @ x: the probe checks each
    config against the reference and stops on a mismatch."""

    stdout = run_tiny_interpreted("probe_split_gemv", "--designs", "mma", "persist", "splitk")
    counts = [int(line.split(": ")[1].split()[0]) for line in stdout.splitlines() if "match the reference" in line]
    assert len(counts) == 2 and all(c >= 2 + 6 for c in counts), stdout  # 2 mma + 6 splitk configs at least


def test_grid_barrier_probe_fused_kernel_matches_tiny_interpreted():
    """The probe's fused kernel (two GEMVs and a grid barrier, one program here) equals its two separate launches
    and the reference, for both pairs; the probe exits non-zero otherwise."""

    stdout = run_tiny_interpreted("probe_grid_barrier")
    assert stdout.count("equal to separate True, counter 1, flag 0") == 2, stdout


def test_pdl_preload_probe_kernel_matches_torch_tiny_interpreted():
    """The PDL probe's kernel (PDL off: the interpreter has no griddepcontrol) computes each linear of a decode
    layer as torch does, for every config it would time, with a K that is not a power of two among them."""

    stdout = run_tiny_interpreted("probe_pdl_preload")
    for linear in ("qkv", "o", "gate_up", "down"):
        assert stdout.count(f"tiny {linear} ") >= 8, stdout  # R 1..16 (where it divides N) x 4 / 8 warps


def test_whole_share_probe_kernel_matches_torch_tiny_interpreted():
    """Design 28's kernel (PDL off) computes the q/k/v as torch does with 1-3 sub-blocks a program, with and without
    the norm; the probe exits non-zero otherwise."""
    stdout = run_tiny_interpreted("probe_whole_share")
    assert stdout.count("tiny (") == 6, stdout


def test_whole_share_fits_two_programs_an_sm_and_loads_it_before_the_wait_for_hopper():
    """Design 28's premise as compiled for sm_90: the 1B q/k/v's 24 rows a program (3 x 8, 4 warps) take at most
    255 registers with no spill, so two programs (this kernel's and the next one's) fit an SM's 65,536; every weight
    load comes before griddepcontrol.wait, x's after it (only the norm weight, a parameter, may come before)."""
    hopper = pytest.importorskip("tests.kernels.test_compile_for_hopper")
    import probe_whole_share

    if hopper.GPUTarget is None or os.environ.get("TRITON_INTERPRET") == "1" or probe_whole_share.gdc_wait is None:
        pytest.skip("needs triton's compiler with griddepcontrol")
    ptrs = ("x_ptr", "nw_ptr", "w_ptr", "out_ptr")
    for norm in (False, True):
        asm = hopper.compile_for_hopper(probe_whole_share.whole_share_kernel, dict.fromkeys(ptrs, "*bf16") | {
            "eps": "fp32"}, dict(K=2048, KP=2048, R=8, SUBS=3, NORM=norm, READ_ONLY=False, PDL=True), aligned=ptrs,
            num_warps=4)
        regs, stack = hopper.registers_per_thread(asm["cubin"])
        assert stack == 0 and 2 * 128 * regs <= 65536, (norm, regs, stack)
        before, after = hopper.before_and_after_the_wait(asm["cubin"])

        def loads(part, weights: bool) -> list:  # the weights' loads are the evict-first ones
            return [s for s in part if s.startswith("LDG") and (".EF" in s) == weights]

        assert len(loads(before, True)) == 24 * 2048 * 2 // 16 // 128 and not loads(after, True), norm
        assert loads(after, False), norm  # x
        assert norm or not loads(before, False), before  # without the norm (a parameter), only the weights before


def interpreted_check(script: str) -> str:
    """stdout of ``script`` run with the probes importable (cwd benchmarks/), as ``run_interpreted``."""
    return run_interpreted("-c", script, cwd=BENCHMARKS)


QKV_PARTS_CHECK = """
import torch, probe_pdl_preload as p
torch.manual_seed(0)
lin = p.Linear("tiny", "qkv", torch.device("cpu"))
entry = (1, 64, True, 4, 1, True, 2)  # persistent, a whole row a block (K 64)
same = torch.equal(p.launch_qkv_part(lin, lin.x, True, True, False, entry).clone(), p.launch_shipped(lin, lin.x))
errs = {form: p.rel_err(p.launch_qkv_part(lin, lin.x, norm, rope, False, entry).clone(),
                        p.shipped_reference(lin, lin.x, norm, rope)) for form, (norm, rope) in p.QKV_PARTS.items()}
print("same", same, "errs", max(errs.values()) < 0.02, sorted(errs))
"""


def test_pdl_preload_probe_qkv_parts_compute_their_forms_interpreted():
    """--qkv-parts' launches (the q/k/v kernel with its norm and RoPE each on or off, at one table config) compute
    each form as torch does, and the full form equals the shipped op bit for bit (the interpreter's tiny shape)."""
    out = interpreted_check(QKV_PARTS_CHECK)
    assert "same True errs True ['neither', 'norm', 'norm+rope', 'rope']" in out, out


QKV_KV_CHECK = """
import torch, probe_pdl_preload as p
torch.manual_seed(0)
lin = p.Linear("tiny", "qkv", torch.device("cpu"))
y, y_kv = p.launch_shipped(lin, lin.x).clone(), p.launch_shipped_kv(lin, lin.x).clone()
h, kv, pos = lin.k, (lin.n - lin.k) // 2, p.CACHE_LEN // 2
k_cache, v_cache = lin.caches
k_ok = torch.equal(k_cache[0, :, pos].reshape(-1), y_kv[0, h:h + kv]) and k_cache.count_nonzero() == kv
v_ok = torch.equal(v_cache[0, :, pos].reshape(-1), y_kv[0, h + kv:]) and v_cache.count_nonzero() == kv
print("close", p.rel_err(y_kv, y) < 0.01, "k", bool(k_ok), "v", bool(v_ok))
"""


def test_pdl_preload_probe_qkv_kv_writes_k_and_v_at_the_cache_position_interpreted():
    """--qkv-kv's cache-writing launch computes the q/k/v of the plain launch and stores exactly its k and v
    columns at the cache's middle position, nowhere else (the interpreter's tiny shape)."""
    out = interpreted_check(QKV_KV_CHECK)
    assert "close True k True v True" in out, out


QKV_FORMS_CHECK = """
import torch, probe_pdl_preload as p
torch.cuda.synchronize = lambda: None
p.time_graph = lambda step: (step(), 1.0)[1]
make = p.Linear
p.Linear = lambda shape, linear, device: make(shape, linear, torch.device("cpu"))
rows = []
p.qkv_kv("cpu", 1.0, 2, lambda **row: rows.append(row), shapes=("tiny",))
p.kv_stores("cpu", 1.0, 2, lambda **row: rows.append(row), shapes=("tiny",))
print("variants", [r["variant"] for r in rows if "variant" in r])
print("checks", len([r for r in rows if "check" in r]), all(r["equal"] for r in rows if "check" in r))
"""


def test_pdl_preload_probe_qkv_forms_check_what_they_launch_interpreted():
    """--qkv-kv's and --kv-stores' chains (the shared ``qkv_forms``) on the interpreter's tiny shape, a clock that
    only runs each step: every form plain and PDL, and every bit-for-bit check holds (PDL is off there, so twins
    are plain launches; k/v left out of y keeps q and the caches as shipped)."""
    out = interpreted_check(QKV_FORMS_CHECK)
    assert ("variants ['rope', 'rope+pdl', 'kv', 'kv+pdl', 'kv', 'kv+pdl', 'kv, k/v only cached', "
            "'kv, k/v only cached+pdl']") in out, out
    assert "checks 6 True" in out, out


def test_pdl_preload_probe_marginal_takes_one_linear_out_of_the_layer_at_a_time(monkeypatch):
    """--marginal's arithmetic, with a clock that counts launches: the whole layer launches the four linears (the
    q/k/v in its cache-writing form, the chain's first GEMV plainly and every later one as its PDL twin); the layer
    without a linear launches the other three, so each linear adds one launch a layer."""
    import probe_pdl_preload as p

    class Named(str):  # a linear that only knows its name and its bytes
        def bytes(self):
            return 1

    launches = []
    monkeypatch.setattr(p, "Linear", lambda shape, linear, device: Named(linear))
    monkeypatch.setattr(p, "chain_inputs", lambda lins: [None] * len(lins))
    monkeypatch.setattr(p, "launch_shipped", lambda lin, x, pdl=False: launches.append((lin, "plain", pdl)))
    monkeypatch.setattr(p, "launch_shipped_kv", lambda lin, x, pdl=False: launches.append((lin, "kv", pdl)))

    def clock(step):
        launches.clear()
        step()
        assert [pdl for _, _, pdl in launches] == [False] + [True] * (len(launches) - 1)
        assert all((form == "kv") == (lin == "qkv") for lin, form, _ in launches)
        return float(len(launches))

    monkeypatch.setattr(p, "time_graph", clock)
    rows = p.marginal("cpu", 1e-6, 3, lambda **row: None, shapes=("tiny",))
    assert [(r["chain"], r.get("us_per_gemv", r.get("us_per_layer"))) for r in rows] == [
        ("layer", 4.0), ("qkv", 1.0), ("o", 1.0), ("gate_up", 1.0), ("down", 1.0)]


def test_pdl_preload_probe_requests_every_weight_row_before_the_wait_for_hopper():
    """What the probe measures holds in the sm_90 SASS: the program lets the next kernel launch (PREEXIT), issues
    all its weight loads (evict-first) before griddepcontrol.wait (ACQBULK), and every other load (x, the
    residual: what an earlier kernel writes) after it."""
    hopper = pytest.importorskip("tests.kernels.test_compile_for_hopper")
    import re

    import probe_pdl_preload

    if hopper.GPUTarget is None or os.environ.get("TRITON_INTERPRET") == "1" or probe_pdl_preload.gdc_wait is None:
        pytest.skip("needs triton's compiler with griddepcontrol")
    ptrs = ("x_ptr", "w_ptr", "u_ptr", "res_ptr", "out_ptr")
    for k, r, gated, res in ((2048, 16, False, True), (2048, 4, True, False), (8192, 4, False, True)):
        asm = hopper.compile_for_hopper(probe_pdl_preload.preload_gemv_kernel, dict.fromkeys(ptrs, "*bf16"), dict(
            K=k, KP=k, R=r, GATED=gated, RES=res, READ_ONLY=False, PDL=True), aligned=ptrs, num_warps=8)
        ins = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", hopper.cuobjdump(asm["cubin"], "-sass"))]
        wait = next(i for i, s in enumerate(ins) if s.startswith("ACQBULK"))
        assert any(s.startswith("PREEXIT") for s in ins[:wait]), (k, r)
        loads = [(i, s.split()[0]) for i, s in enumerate(ins) if s.startswith("LDG")]
        weights = [i for i, op in loads if ".EF" in op]
        assert len(weights) == r * k * (1 + gated) * 2 // 16 // 256, (k, r, gated)  # 128-bit loads, 256 threads
        assert max(weights) < wait < min(i for i, op in loads if ".EF" not in op), (k, r, loads, wait)


def test_flag_wait_probe_polls_the_count_after_the_weights_and_counts_after_the_store_for_hopper():
    """Design 27 as compiled for sm_90: the weights are requested before the counter is polled, no
    griddepcontrol.wait is left, x is read only after the poll's loop and the acquire (L1 invalidated), and one
    release add per program (after a fence) follows the output's store; without WAIT_FOR the program waits on the
    grid as before and still counts itself."""
    hopper = pytest.importorskip("tests.kernels.test_compile_for_hopper")
    import re

    import probe_pdl_preload

    if hopper.GPUTarget is None or os.environ.get("TRITON_INTERPRET") == "1" or probe_pdl_preload.gdc_wait is None:
        pytest.skip("needs triton's compiler with griddepcontrol")
    ptrs = ("x_ptr", "w_ptr", "u_ptr", "res_ptr", "out_ptr")
    types = dict.fromkeys(ptrs, "*bf16") | {"wait_count": "*i32", "done_count": "*i32"}
    for wait_for in (384, 0):
        asm = hopper.compile_for_hopper(probe_pdl_preload.preload_gemv_kernel, types, dict(
            K=2048, KP=2048, R=8, GATED=False, RES=False, READ_ONLY=False, PDL=True, WAIT_FOR=wait_for, SIGNAL=True),
            aligned=ptrs, num_warps=4)
        assert hopper.registers_per_thread(asm["cubin"])[1] == 0
        ins = hopper.sass(asm["cubin"])
        weights = [i for i, s in enumerate(ins) if s.startswith("LDG") and ".EF" in s]
        others = [i for i, s in enumerate(ins) if s.startswith("LDG") and ".EF" not in s and ".STRONG" not in s]
        store = next(i for i, s in enumerate(ins) if s.startswith("STG.E.U16"))
        adds = [i for i, s in enumerate(ins) if i > store and re.search(r"\b(?:ATOMG|REDG?)\.E\.ADD", s)]
        assert len(adds) == 1 and any("MEMBAR" in s for s in ins[store:adds[0]]), wait_for
        if wait_for:
            assert not any(s.startswith("ACQBULK") for s in ins)
            poll = next(i for i, s in enumerate(ins) if s.startswith("LDG.E.STRONG"))
            invalidate = next(i for i, s in enumerate(ins) if "CCTL.IVALL" in s)
            assert max(weights) < poll < invalidate < min(others), (poll, invalidate, others)
            # the loop: compare the count with the programs waited for (384 = 0x180), branch back to the poll
            assert "0x180" in ins[poll + 1] and "BRA" in ins[poll + 2], ins[poll:poll + 3]
        else:
            wait = next(i for i, s in enumerate(ins) if s.startswith("ACQBULK"))
            assert max(weights) < wait < min(others)


def test_pdl_candidates_fit_their_register_caps_for_hopper():
    """Each of the probe's PDL_PERSISTENT candidates, compiled for sm_90 as its PDL launch runs it (and its plain
    entry as the plain launch runs it), fits its register cap without spilling, and a candidate without PREFETCH
    covers every block with programs that fit on 132 SMs at once: a config that spills or runs a second wave would
    be timed for nothing."""
    hopper = pytest.importorskip("tests.kernels.test_compile_for_hopper")
    import probe_pdl_preload

    from fusion_passes.kernels import gemv_table

    if hopper.GPUTarget is None or os.environ.get("TRITON_INTERPRET") == "1" or probe_pdl_preload.gdc_wait is None:
        pytest.skip("needs triton's compiler with griddepcontrol")
    for linear, cands in probe_pdl_preload.PDL_CANDIDATES.items():
        form, _, *widths = probe_pdl_preload.PDL_CANDIDATE_FORMS[linear]
        key = ("NVIDIA H200", *probe_pdl_preload.PDL_CANDIDATE_FORMS[linear])
        columns = sum(widths) // 2 if form == "rope" else widths[0]  # a RoPE block's column is a pair of rows
        for cand in cands:
            pdl_entry, plain_entry = probe_pdl_preload.candidate_entries(cand)
            for entry, pdl in ((pdl_entry, True), (plain_entry, False)):
                with probe_pdl_preload.gemv_tables({key: entry}, {key: entry}):
                    asm, config, _ = hopper.compile_persistent_entry((key, pdl))
                assert hopper.registers_per_thread(asm["cubin"])[1] == 0, (linear, entry, pdl)
                assert config["PREFETCH"] or 132 * config["PERSIST"] * config["BLOCK_N"] >= columns, entry


def test_split_gemv_probe_mma_design_runs_on_the_tensor_cores_for_hopper():
    """The mma design is what its name says once compiled for sm_90: MMA instructions, with x on either side."""
    hopper = pytest.importorskip("tests.kernels.test_compile_for_hopper")
    import probe_split_gemv

    if hopper.GPUTarget is None or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs triton's compiler")
    types = {"X": "*bf16", "W": "*bf16", "Y": "*bf16", "N": "i32", "K": "i32"}
    for xa in (0, 1):
        asm = hopper.compile_for_hopper(probe_split_gemv._gemv_mma, types,
                                        dict(BLOCK_N=64, BLOCK_K=128, STAGES=3, XA=xa), num_warps=4)
        assert "mma" in asm["ptx"], xa  # wgmma.mma_async or mma.sync
        assert "fma.rn.f32" not in asm["ptx"], xa  # no multiply-adds on the CUDA cores


def test_mma_gemv_probe_takes_its_operands_from_the_lanes_loads_for_hopper():
    """Design 23 as its docstring says, once compiled for sm_90: every weight load (evict-first, 16 bytes) before
    griddepcontrol.wait, the dot on the tensor cores after it, and the [R, K/2] tile never converted to another
    layout (no shared-memory round trip of the weights); a config whose lanes would hold under 8 int32 of a row
    (the asm's pack: two rows summed as one) does not compile."""
    hopper = pytest.importorskip("tests.kernels.test_compile_for_hopper")
    import probe_mma_gemv

    if hopper.GPUTarget is None or os.environ.get("TRITON_INTERPRET") == "1" or probe_mma_gemv.gdc_wait is None:
        pytest.skip("needs triton's compiler with griddepcontrol")
    types = {"x_ptr": "*bf16", "w_ptr": "*bf16", "nw_ptr": "*bf16", "out_ptr": "*bf16", "eps": "fp32"}
    for rows, warps in probe_mma_gemv.CONFIGS:
        consts = dict(K=2048, R=rows, NORM=True, PDL=True, NUM_WARPS=warps)
        asm = hopper.compile_for_hopper(probe_mma_gemv.mma_gemv_kernel, types, consts, aligned=tuple(types)[:4],
                                        num_warps=warps)
        before, after = hopper.before_and_after_the_wait(asm["cubin"])
        assert sum(s.startswith("LDG.E.EF.128") for s in before) == rows * 1024 // (4 * 32 * warps)
        assert not any(s.startswith("LDG.E.EF") for s in after)
        assert sum(s.startswith("HMMA") for s in after) == rows * 1024 // (2 * 32 * warps)  # 4 mmas a 8 int32
        assert not [line for line in asm["ttgir"].splitlines() if "convert_layout" in line and "x1024x" in line]
    with pytest.raises(Exception, match="8 int32"):
        hopper.compile_for_hopper(probe_mma_gemv.mma_gemv_kernel, types,
                                  dict(K=2048, R=8, NORM=False, PDL=True, NUM_WARPS=8), num_warps=8)


@pytest.mark.parametrize("paired, early", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("form", ["kv", "norm", "res"])
def test_smem_gemv_probe_stages_the_weights_before_the_wait_for_hopper(form, paired, early):
    """Designs 25-26 as the probe's docstring says, once compiled for sm_90 (Gluon): each block's weights requested
    by two TMA copies (RoPE's halves; ``paired``: one), all before griddepcontrol.wait; no weight byte loaded to
    registers from global memory; after the wait the x loads, the mbarrier waits, shared-memory reads and the stores
    (to the caches too in the "kv" form), no cross-warp exchange (each row and its RoPE partner stay in one warp)
    and no spill. ``early``: every block's cos / sin (or residual) and the cache position requested right after the
    wait, ahead of x, with nothing else before x's loads."""
    hopper = pytest.importorskip("tests.kernels.test_compile_for_hopper")
    import probe_smem_gemv as probe

    if hopper.GPUTarget is None or os.environ.get("TRITON_INTERPRET") == "1" or probe.gluon is None:
        pytest.skip("needs triton's compiler with Gluon")
    ptrs = ("x_ptr", "nw_ptr", "res_ptr", "out_ptr", "cos_ptr", "sin_ptr", "kc_ptr", "vc_ptr")
    norm, rope, kv = probe.FORMS.get(form, (False, False, False))
    for rows, per_sm, warps in probe.CONFIGS[:2]:
        blocks = probe.blocks_per_program(3072, rows, 132 * per_sm)
        types = dict(w_desc=probe.descriptor_type(rows, 2048, paired), pos_ptr="*i64", eps="fp32", n_blocks="i32",
                     cache_len="i32", **{p: "*bf16" for p in ptrs})
        consts = dict(K=2048, R=rows, HD=64, BLOCKS=blocks, NORM=norm, RES=form == "res",
                      ROPE_HEADS=40 if rope else 0, Q_HEADS=32 if kv else 48, KV_HEADS=8 if kv else 0,
                      READ_ONLY=False, PDL=True, NUM_WARPS=warps, PAIRED=paired, EARLY=early)
        asm = hopper.compile_for_hopper(probe.smem_gemv_kernel, types, consts, aligned=ptrs, num_warps=warps)
        before, after = hopper.before_and_after_the_wait(asm["cubin"])
        copies = blocks if paired else 2 * blocks  # RoPE's halves: one box of interleaved pairs, or two
        assert sum(s.startswith("UTMALDG.3D") for s in before) == copies, (rows, per_sm, form)
        assert not any(s.startswith("UTMALDG") for s in after)
        loads = [s for s in before + after if s.startswith("LDG")]
        # x [2048] (and the norm weight) in 16-byte loads by each lane of each warp; cos / sin and the position
        assert sum(s.startswith("LDG.E.128") for s in after) == 2048 // (8 * 32), (rows, form)
        assert sum(s.startswith("LDG.E.128") for s in before) == (2048 // (8 * 32) if norm else 0)
        assert len(loads) <= 2 * 2048 // (8 * 32) + blocks * (4 * rope + 2 * (form == "res")) + kv, loads
        assert sum(s.startswith("SYNCS.PHASECHK") for s in after) >= blocks
        assert any(s.startswith("LDS.128") for s in after)
        # no sum goes through shared memory (Triton still puts a barrier after the norm's reduction and before each
        # later block's mbarrier wait; ``early`` one more ahead of x)
        assert not any(s.startswith("STS") for s in after), "a cross-warp exchange after the wait"
        assert sum(s.startswith("BAR.") for s in after) <= blocks + early
        assert sum(s.startswith("STG") for s in after) >= 2 * blocks
        assert hopper.registers_per_thread(asm["cubin"])[1] == 0, "spills"
        x_at = min(i for i, s in enumerate(after) if s.startswith("LDG.E.128"))
        operands = [i for i, s in enumerate(after) if s.startswith("LDG") and not s.startswith("LDG.E.128")]
        if early:  # the epilogue's operands all requested before x, and only they
            assert len(operands) == blocks * (4 * rope + 2 * (form == "res")) + kv, (rows, form)
            assert all(i < x_at for i in operands), (rows, form)
            assert not [s for s in after[:x_at] if s.startswith(("LDS", "SYNCS", "STG"))]
        else:
            assert not [i for i in operands if i < x_at]


def test_smem_gemv_probe_pairs_each_heads_rope_rows():
    """Design 26's one-time interleave: row 2i of a head is its row i, row 2i + 1 its RoPE partner i + hd / 2, so
    R consecutive rows of the copy are R / 2 whole pairs (what the kernel's PAIRED blocks read as [R / 2, 2])."""
    import probe_smem_gemv as probe

    hd, heads, k = 8, 3, 16
    w = torch.arange(heads * hd, dtype=torch.float32)[:, None].expand(-1, k).contiguous()
    paired = probe.paired_rows(w, hd)
    assert paired.shape == w.shape and paired.is_contiguous()
    for head in range(heads):
        for i in range(hd // 2):
            assert torch.equal(paired[head * hd + 2 * i], w[head * hd + i])
            assert torch.equal(paired[head * hd + 2 * i + 1], w[head * hd + i + hd // 2])
    assert not torch.equal(paired, w)


def test_gemv_chain_bench_tiny_cpu(tmp_path):
    import bench_gemv_chain

    out = tmp_path / "chain.json"
    assert bench_gemv_chain.main(["--tiny", "--out", str(out), "--variants", "cublas", "ours", "ours-noprefetch",
                                  "ours-late", "read"]) == 0
    recs = json.loads(out.read_text())["records"]
    assert [r["variant"] for r in recs] == ["cublas", "ours", "ours-noprefetch", "ours-late", "read"]
    assert all(r["ms"] > 0 and r["weight_gb"] >= 0 for r in recs)
    assert bench_gemv_chain.weight_bytes(bench_gemv_chain.make_weights(bench_e2e.CONFIGS["tiny"], "cpu",
                                                                       torch.float32)) == 4 * (2 * (
        64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 128 * 64) + 256 * 64)  # 2 layers of q,k,v,o,g,u,d + lm_head, fp32


def test_decode_overhead_tiny_cpu(tmp_path):
    import decode_overhead

    out = tmp_path / "ov.json"
    assert decode_overhead.main(["--tiny", "--device", "cpu", "--variants", "fusion_passes", "--out", str(out)]) == 0
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["synced_ms"] > 0 and rec["synced_ms_skip_guards"] > 0
    assert rec["host_functions"] and all("own_us" in f for f in rec["host_functions"])


def test_decode_overhead_takes_a_prefill_workload(tmp_path):
    import decode_overhead

    out = tmp_path / "ov.json"
    assert decode_overhead.main(["--tiny", "--device", "cpu", "--workload", "prefill-512", "--variants", "stock",
                                 "--cprofile", "0", "--out", str(out)]) == 0
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["workload"] == "prefill-16" and rec["synced_ms"] > 0  # --tiny shortens it


def test_host_overhead_probe_tiny_cpu(tmp_path):
    """Per-op host times, then each variant's model: the ours-without-a-family variants compile without that
    family, and ours' packed q/k/v take the one-GEMM path on every call."""
    import probe_host_overhead

    out = tmp_path / "host.json"
    assert probe_host_overhead.main(["--tiny", "--device", "cpu", "--variants", "stock", "fusion_passes",
                                     "fusion_passes+nopack", "--out", str(out)]) == 0
    recs = {r["case"]: r for r in json.loads(out.read_text())["records"]}
    assert recs["packed_linear (q, k, v)"]["host_us"] > 0 and recs["host only: packed_linear (q, k, v)"]["host_us"] > 0
    assert recs["host only: 3 mm (q, k, v)"]["tokens"] == 1
    models = [r for case, r in recs.items() if "prefill" in case]
    assert [r["case"].split(", ")[-1] for r in models] == ["stock", "fusion_passes", "fusion_passes+nopack"]
    paths = [r["packed_linear_paths"] for r in models]
    assert paths[1].get("packed", 0) > 0 and paths[1].get("repacked", 0) == 0 and not paths[1].get("unpacked")
    assert not paths[2].get("packed") and not paths[0].get("packed")
    assert all(r["synced_ms"] > 0 and r["timeline"]["host_ops"] for r in models)


def test_timeline_gaps_and_host_share():
    from types import SimpleNamespace as Event

    import profile_decode

    # two steps of three 6 us kernels launched every 10 us
    evs = [Event(name=f"k{i % 3}", time_range=Event(start=i * 10.0, end=i * 10 + 6.0)) for i in range(6)]
    t = profile_decode.timeline(evs, steps=2, first=2)
    assert (t["kernels"], t["span_us"], t["busy_us"], t["gaps_us"], t["between_steps_us"]) == (3, 26.0, 18.0, 8.0, 4.0)
    assert [k["gap_us"] for k in t["first_kernels"]] == [0.0, 4.0]


def test_generation_parity_tiny_cpu(tmp_path, monkeypatch):
    import generation_parity

    monkeypatch.setenv("FUSION_PASSES_DECODE_GEMV", "always")
    monkeypatch.setenv("FUSION_PASSES_DECODE_ATTENTION", "always")
    out = tmp_path / "gp.json"
    assert generation_parity.main(["--tiny", "--device", "cpu", "--attn", "sdpa", "--variants", "fusion_passes",
                                   "--out", str(out)]) == 0
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["same_tokens"] == rec["steps"] == 8 and rec["argmax_flips"] == 0 and rec["explained"]
    assert rec["teacher_forced_max_logit_err"] < 1e-4  # fp32


def test_generation_parity_runs_each_variant_under_its_settings(tmp_path, monkeypatch):
    """A variant's suffix (``+normlate``) holds its setting while the variant compiles and generates, and only
    then; the record names it (session 60: it had been ignored, so the late norm's run measured the default)."""
    import generation_parity

    from fusion_passes.kernels import gemv_table

    monkeypatch.delenv(gemv_table.NORM_POLICY_ENV, raising=False)
    seen = []

    def compare(model, compiled, *args, **kwargs):
        seen.append(gemv_table.norm_policy())
        return dict(steps=0, same_tokens=0, teacher_forced_max_logit_err=0.0, argmax_flips=0, explained=True)

    monkeypatch.setattr(generation_parity, "compare", compare)
    monkeypatch.setattr(generation_parity, "make_variant", lambda model, variant: model)
    out = tmp_path / "gp.json"
    assert generation_parity.main(["--tiny", "--device", "cpu", "--attn", "sdpa", "--variants", "fusion_passes",
                                   "fusion_passes+normlate", "--out", str(out)]) == 0
    assert seen == ["exact", "late"]
    assert gemv_table.norm_policy() == "exact"
    recs = json.loads(out.read_text())["records"]
    assert [r["settings"] for r in recs] == [{}, {gemv_table.NORM_POLICY_ENV: "late"}]


def test_rope_variant_sets_the_policy_only_while_it_runs(monkeypatch):
    from fusion_passes.patterns import decode_gemv

    monkeypatch.delenv(decode_gemv.ROPE_POLICY_ENV, raising=False)
    assert decode_gemv.rope_policy() == "on"  # the default
    with bench_e2e.variant_env("fusion_passes+norope+cudagraphs"):
        assert decode_gemv.rope_policy() == "off"
    monkeypatch.setenv(decode_gemv.ROPE_POLICY_ENV, "off")
    with bench_e2e.variant_env("fusion_passes+rope+cudagraphs"):
        assert decode_gemv.rope_policy() == "on"
    with bench_e2e.variant_env("fusion_passes+cudagraphs"):
        assert decode_gemv.rope_policy() == "off"  # the user's setting, untouched
    assert decode_gemv.rope_policy() == "off"


def test_inline_variant_combines_with_rope_and_unknown_suffixes_are_refused(monkeypatch):
    from fusion_passes.patterns import attention_sdpa, decode_gemv

    monkeypatch.delenv(attention_sdpa.INLINE_POLICY_ENV, raising=False)
    monkeypatch.delenv(decode_gemv.KV_WRITE_POLICY_ENV, raising=False)
    monkeypatch.delenv(decode_gemv.ROPE_POLICY_ENV, raising=False)
    with bench_e2e.variant_env("fusion_passes+noinline+norope"):
        assert attention_sdpa.inline_policy() == "off" and decode_gemv.rope_policy() == "off"
    assert attention_sdpa.inline_policy() == "on" and decode_gemv.rope_policy() == "on"
    with bench_e2e.variant_env("fusion_passes+kv+noinline"):
        assert decode_gemv.kv_write_policy() == "on" and attention_sdpa.inline_policy() == "off"
    assert bench_e2e.inductor_options("fusion_passes+combo+kv+cudagraphs") == {"combo_kernels": True}
    assert bench_e2e.forced_policies("fusion_passes+combo+kv") == {decode_gemv.KV_WRITE_POLICY_ENV: "on"}
    assert bench_e2e.inductor_options("stock+combo") == {"combo_kernels": True}
    from fusion_passes.kernels import gemv_table

    assert bench_e2e.forced_policies("fusion_passes+notable+nostate+cudagraphs") == {gemv_table.POLICY_ENV: "off"}
    monkeypatch.delenv(gemv_table.NORM_POLICY_ENV, raising=False)
    with bench_e2e.variant_env("fusion_passes+normlate+graphstep"):
        assert gemv_table.norm_policy() == "late"
    assert gemv_table.norm_policy() == "exact"
    # PDL variants that change the persistent entries for the variant (the PDL twins read them per launch)
    monkeypatch.delenv(gemv_table.DEVICE_POLICY_ENV, raising=False)
    persistent, pdl_persistent = gemv_table.PERSISTENT, gemv_table.PDL_PERSISTENT
    with bench_e2e.variant_env("fusion_passes+graphstep+pdlplain"):
        assert gemv_table.PDL_PERSISTENT == {} and gemv_table.PERSISTENT == persistent
    with bench_e2e.variant_env("fusion_passes+graphstep+h200table+pdl2"):
        assert gemv_table.PDL_PERSISTENT == {} and gemv_table.device_policy() == "NVIDIA H200"
        assert gemv_table.PERSISTENT[("NVIDIA H200", "rope", 2048, 2048, 512, 512)][7] == 2
    assert gemv_table.PERSISTENT is persistent and gemv_table.PDL_PERSISTENT is pdl_persistent
    assert gemv_table.device_policy() == "auto"
    with pytest.raises(ValueError, match="stock takes only combo"):
        bench_e2e.make_variant(torch.nn.Linear(2, 2), "stock+kv")
    with pytest.raises(ValueError, match="unknown variant 'fusion_passes\\+inlined'"):
        bench_e2e.make_variant(torch.nn.Linear(2, 2), "fusion_passes+inlined")


def test_peer_variants_parse_and_refuse_what_they_cannot_run():
    """stock+freeze is Inductor's freezing; liger takes stock (compiled) and Inductor suffixes only, needs CUDA,
    and has no CUDA graphs uncompiled; paired rounds refuse it (its module patches would leak into the others)."""
    assert bench_e2e.inductor_options("stock+freeze+cudagraphs") == {"freezing": True}
    assert bench_e2e.inductor_options("liger+stock+freeze") == {"freezing": True}
    assert bench_e2e.inductor_options("liger+stock+cudagraphs") == {}
    with pytest.raises(ValueError, match="liger takes only combo, freeze, stock"):
        bench_e2e.make_variant(torch.nn.Linear(2, 2), "liger+kv")
    with pytest.raises(ValueError, match="liger\\+stock\\+cudagraphs compiles it"):
        bench_e2e.make_variant(torch.nn.Linear(2, 2), "liger+cudagraphs")
    with pytest.raises(RuntimeError, match="need a CUDA device"):
        bench_e2e.make_variant(torch.nn.Linear(2, 2), "liger+stock")
    with pytest.raises(ValueError, match="not in paired rounds"):
        bench_e2e.measure_paired(None, None, ["stock", "liger"], None, "cpu", 2, 1)


def test_liger_variants_leave_the_modeling_modules_as_they_were():
    """Liger replaces transformers' RoPE function and norm / MLP classes module-wide: after a liger variant (even
    one that raised) every name is back and added names are gone, so later variants run HF's own code."""
    from transformers.models.llama import modeling_llama

    rope, norm = modeling_llama.apply_rotary_pos_emb, modeling_llama.LlamaRMSNorm
    with pytest.raises(KeyError):
        with bench_e2e.variant_env("liger+stock+cudagraphs"):
            modeling_llama.apply_rotary_pos_emb = lambda *a, **k: None
            modeling_llama.LlamaRMSNorm = torch.nn.Identity
            modeling_llama.added_by_a_peer = 1
            raise KeyError("the variant failed")
    assert modeling_llama.apply_rotary_pos_emb is rope and modeling_llama.LlamaRMSNorm is norm
    assert not hasattr(modeling_llama, "added_by_a_peer")


def test_save_records_merges_and_never_truncates_on_failure(tmp_path, monkeypatch):
    import common

    path = str(tmp_path / "r.json")
    common.save_records([dict(k=1, v="a"), dict(k=2, v="b")], path, key=("k",), device="cpu")
    common.save_records([dict(k=2, v="c")], path, key=("k",), device="cpu")
    assert [(r["k"], r["v"]) for r in json.loads(Path(path).read_text())["records"]] == [(1, "a"), (2, "c")]
    before = Path(path).read_text()

    def broken(device):
        raise AssertionError("Torch not compiled with CUDA enabled")

    monkeypatch.setattr(common, "environment", broken)
    with pytest.raises(AssertionError):
        common.save_records([dict(k=3, v="d")], path, key=("k",), device="cuda")
    assert Path(path).read_text() == before


def test_results_record_the_settings_the_run_started_with(monkeypatch):
    """A run started with FUSION_PASSES_GEMV_NORM=late says so in its results file (the tests' own raise switch
    is not a setting of what was measured)."""
    import common

    monkeypatch.setenv("FUSION_PASSES_GEMV_NORM", "late")
    settings = common.environment("cpu")["settings"]
    assert settings["FUSION_PASSES_GEMV_NORM"] == "late" and "FUSION_PASSES_RAISE" not in settings


def test_gemv_chain_qkv_forms_rotate_and_store_as_the_step_does():
    """--qkv-form: rope rotates q and k (the chain's output changes), kv also stores k and v at the cache position
    (the output does not change again) and nowhere else."""
    import bench_gemv_chain as chain

    torch.manual_seed(0)
    ws = chain.make_weights(bench_e2e.CONFIGS["tiny"], "cpu", torch.float32)
    chain.add_caches(ws, 1)
    x = torch.randn(1, ws["hidden"])
    out = {form: chain.ours_chain(ws, x, qkv_form=form)() for form in chain.QKV_FORMS}
    assert not torch.allclose(out["plain"], out["rope"])
    torch.testing.assert_close(out["kv"], out["rope"])
    for layer in ws["layers"]:
        for cache in layer["caches"]:
            assert cache[:, :, chain.POSITION].abs().sum() > 0
            assert cache[:, :, : chain.POSITION].abs().sum() == 0 and cache[:, :, chain.POSITION + 1:].abs().sum() == 0


def test_gemv_chain_reports_the_autotuners_picks(monkeypatch):
    import bench_gemv_chain
    from fusion_passes.kernels import gemv

    if not gemv.HAS_TRITON or gemv.INTERPRETED:
        pytest.skip("needs triton's autotuner objects")
    triton = pytest.importorskip("triton")
    cfg = triton.Config({"BLOCK_N": 8, "BLOCK_K": 512, "PREFETCH": True}, num_warps=4, num_stages=3)
    key = (2048, 2048, 512, 512, 3, True, False, False, True, "torch.bfloat16")
    monkeypatch.setattr(gemv._gemv_m1[True], "cache", {key: cfg})
    picks = bench_gemv_chain.autotuner_picks(True)
    assert list(picks) == ["K=2048 N=(2048, 512, 512)"] and "PREFETCH: True" in picks["K=2048 N=(2048, 512, 512)"]
    assert bench_gemv_chain.autotuner_picks(False) == {}  # nothing tuned yet with the plain loop only


def test_nostate_variant_leaves_the_counter_updates_alone():
    import fusion_passes
    from tests.patterns.test_state_updates import Counters

    for variant, merged in (("fusion_passes", [3]), ("fusion_passes+nostate", [])):
        model = Counters(3)
        with fusion_passes.capture() as recs, torch.no_grad():
            bench_e2e.make_variant(model, variant)(torch.randn(2, 3))
        assert [m.detail["updates"] for r in recs for m in r.matches_for("state_updates")] == merged
        assert [c.item() for c in model.counters()] == [1, 2, 3]


def test_generate_bench_tiny_cpu(tmp_path):
    """HF generate and the graphed loop, timed per token by differencing two lengths; tokens checked against
    uncompiled generate."""
    import bench_generate

    out = tmp_path / "gen.json"
    variants = ["eager", "fusion_passes+static", "graphed_loop", "fusion_passes+dynamic"]
    assert bench_generate.main(["--tiny", "--device", "cpu", "--variants", *variants, "--out", str(out)]) == 0
    recs = json.loads(out.read_text())["records"]
    assert [r["variant"] for r in recs] == variants
    for r in recs:
        assert "error" not in r and r["same_tokens"] is True, r
        # a loaded CI machine can swamp 5 tiny decode steps; then the record says so instead of a negative time
        assert (r["ms_per_token"] > 0) if r["ms_per_token"] is not None else "T(new)" in r["noise"], r
    # how our graphs ran: on CPU static graphs cannot be used, and the record says why
    assert recs[0]["cudagraphs"] is None
    assert recs[1]["cudagraphs"] and all("not on one CUDA device" in c for c in recs[1]["cudagraphs"]), recs[1]


def test_generate_bench_per_token_reports_noise_instead_of_a_negative_time():
    import bench_generate

    assert bench_generate.per_token_ms(0.30, 0.10, 10) == {"ms_per_token": 20.0}
    swamped = bench_generate.per_token_ms(0.10, 0.12, 10)
    assert swamped["ms_per_token"] is None and "raise --new or --repeats" in swamped["noise"]


def test_l2_prefetch_probe_tiny_cpu(tmp_path):
    """The probe's chain gives the same result with and without prefetching (the stand-in only reads; the
    attention kernel only requests the weight)."""
    import probe_l2_prefetch

    out = tmp_path / "l2.json"
    assert probe_l2_prefetch.main(["--tiny", "--out", str(out)]) == 0
    recs = json.loads(out.read_text())["records"]
    assert [r["variant"] for r in recs] == ["plain", "load", "attn", "attn_pf"]  # ptx: GPU only
    assert all(r["same_result"] and r["ms"] > 0 and r["context"] == 16 for r in recs)


def test_l2_prefetch_stand_in_compiles_for_hopper_with_ptx_prefetches():
    triton = pytest.importorskip("triton")
    hopper = pytest.importorskip("tests.kernels.test_compile_for_hopper")
    import probe_l2_prefetch

    if hopper.GPUTarget is None or probe_l2_prefetch.triton is None or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs triton's compiler")
    types = {"K": "*bf16", "V": "*bf16", "W": "*bf16", "OUT": "*fp32", "n_kv": "i64", "n_w": "i64"}
    counts = []
    for mode in (0, 1, 2):
        asm = hopper.compile_for_hopper(probe_l2_prefetch._stand_in_kernel, types, dict(
            PER_KV=8192, PER_W=65536, BLOCK=1024, MODE=mode, LINE_ELEMS=64), num_warps=4)
        counts.append(asm["ptx"].count("prefetch.global.L2::evict_last"))
    assert counts[:2] == [0, 0] and counts[2] >= 1 and triton is not None


def test_sdpa_prefill_diagnosis_tiny_cpu(capsys):
    """The diagnosis prints the mask the proof judged (once: both layers read it) and the rewrite it led to (a
    causal prompt: dropped), and leaves the pass and Inductor's config as it found them."""
    import diag_sdpa_prefill
    from fusion_passes.patterns import attention_sdpa

    proof, cache = attention_sdpa._prove_mask_kind, torch._inductor.config.fx_graph_cache
    diag_sdpa_prefill.main(["--tiny", "--tokens", "16"])
    out = capsys.readouterr().out
    assert out.count("-> causal") == 1 and out.count("causal (constant mask dropped") == 2, out
    assert attention_sdpa._prove_mask_kind is proof and torch._inductor.config.fx_graph_cache == cache


def test_e2e_paired_rounds_tiny_cpu(tmp_path):
    """``--rounds``: every variant compiled once, timed in alternating rounds with nothing recompiled in between;
    each record has its per-round times and its ratio to the first variant (1 for the first itself). ``--control``
    adds the first variant again, compiled separately, as the run's noise."""
    out = tmp_path / "paired.json"
    assert bench_e2e.main(["--tiny", "--device", "cpu", "--attn", "eager", "--workloads", "prefill-16", "--variants",
                           "stock", "fusion_passes", "--rounds", "4", "--control", "--out", str(out)]) == 0
    recs = json.loads(out.read_text())["records"]
    assert [r["variant"] for r in recs] == ["stock", "fusion_passes", "stock (control)"]  # stock compiled twice
    for r in recs:
        assert r["rounds"] == 4 and len(r["round_ms"]) == 4 and all(t > 0 for t in r["round_ms"]), r
        assert r["recompiles"] == 0 and r["max_err"] < 1e-3 and r["vs_first"] == "stock", r
        assert r["median_ms"] == sorted(r["round_ms"])[2]
    assert recs[0]["ratio_to_first"] == 1.0 and recs[0]["faster_rounds"] == 0
    assert 0 <= recs[1]["faster_rounds"] <= 4 and recs[1]["ratio_to_first"] > 0
    # the paths our packed GEMM took while timed: stock runs none; ours only the steady one-GEMM path
    assert recs[0]["packed_linear_paths"] == {} and recs[2]["packed_linear_paths"] == {}
    assert set(recs[1]["packed_linear_paths"]) == {"packed"} and recs[1]["packed_linear_paths"]["packed"] >= 4 * 4


def _ncu_csv(path, header, rows):
    """ncu's CSV as `ncu --import ... --csv` prints it: every field quoted, after the profiled program's output."""
    lines = ["[ncu_gemv] llama-1b ours: 17 launches profiled", ",".join(f'"{h}"' for h in header)]
    lines += [",".join(f'"{v}"' for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_ncu_gemv_probe_tiny_cpu_and_its_summary_per_linear(tmp_path, capsys):
    import ncu_gemv

    assert ncu_gemv.main(["--tiny", "--device", "cpu", "--layers", "2"]) == 0
    assert capsys.readouterr().out.count("9 launches profiled") == 2  # (4 linears x 2 layers + lm_head) per variant
    # a details page for 2 layers: 9 GEMV launches, then 9 read launches; durations differ by linear and layer
    labels = ncu_gemv.kernel_labels(2)
    header = ["ID", "Process ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
    rows, raw_rows = [], []
    for i, label in enumerate(labels * 2):
        name = "_read_kernel" if i >= len(labels) else "_decode_gemv_kernel"
        us = 10.0 * (1 + ncu_gemv.LINEARS.index(label) if label in ncu_gemv.LINEARS else 50) + (i % 4) * 0.1
        rows.append([i, 1, name, "GPU Speed Of Light Throughput", "Duration", "us", f"{us:.2f}"])
        rows.append([i, 1, name, "Launch Statistics", "Grid Size", "", "1,584"])
        raw_rows.append([i, name, f"{2.0 + i:.1f}", "0.5", "9.0"])
    details = _ncu_csv(tmp_path / "d.csv", header, rows)
    stall = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    raw_header = ["ID", "Kernel Name", stall.format("long_scoreboard"), stall.format("barrier"),
                  "smsp__average_warps_issue_stalled_not_issued_per_issue_active.ratio"]
    raw = _ncu_csv(tmp_path / "r.csv", raw_header, [["", "", "ratio", "ratio", "ratio"], *raw_rows])
    summary = ncu_gemv.summarize(ncu_gemv.read_details(details), 2, ncu_gemv.read_stalls(raw))
    by = {(r["variant"], r["linear"]): r for r in summary}
    assert len(by) == 10
    # the median over the two layers of one linear: layer 0's o is launch 1 (10.1 + 10), layer 1's launch 5
    assert by[("ours", "o")]["Duration [us]"] == pytest.approx((20.1 + 20.1) / 2)
    assert by[("read", "lm_head")]["Duration [us]"] == pytest.approx(500.1)  # launch 17
    assert by[("ours", "down")]["Grid Size"] == 1584  # thousands separators read
    # the first layer's stalls, largest first, ncu's "not_issued" total left out
    assert by[("ours", "qkv")]["stalls (cycles / issue)"] == "long_scoreboard 2.0, barrier 0.5"
    assert by[("read", "qkv")]["stalls (cycles / issue)"].startswith("long_scoreboard 11.0")
    assert ncu_gemv.main(["--summarize", details, "--raw", raw, "--layers", "2"]) == 0
    assert "long_scoreboard" in capsys.readouterr().out
    # a report with a launch missing is refused for that variant, not mislabelled
    short = _ncu_csv(tmp_path / "s.csv", header, rows[2:])
    assert [r["variant"] for r in ncu_gemv.summarize(ncu_gemv.read_details(short), 2)] == ["read"] * 5


def test_sass_loop_probe_reads_the_hot_loop():
    """probe_sass_loop's reading of cuobjdump's SASS: the last backward branch's body, its weight loads, first and
    last multiply-add and barriers, by position in the body."""
    import probe_sass_loop

    lines = ["MOV R1, c[0x0][0x28]", "LDG.E.EF.128 R4, desc[UR4][R2.64]", "FFMA R8, R4, R5, R8",  # before the loop
             "FFMA R9, R4, R6, R9", "LDG.E.EF.128 R4, desc[UR4][R2.64]", "BAR.SYNC.DEFER_BLOCKING 0x0",
             "FFMA R10, R4, R7, R10", "@!P0 BRA 0x0020", "EXIT", "BRA 0x0090"]
    text = "\n".join(f"        /*{16 * i:04x}*/                   {ins} ;  /* 0x0 */" for i, ins in enumerate(lines))
    assert probe_sass_loop.hot_loop(text) == dict(instructions=6, weight_loads=[2], ffma=(0, 4), barriers=[3])


def test_sass_loop_probe_compiles_a_table_entry():
    """One gemv_table.PERSISTENT entry compiled for sm_90 on this CPU (skipped where triton has no ptxas): the
    loop has its weight loads and multiply-adds, and the entry compiles without spilling."""
    import probe_sass_loop

    from fusion_passes.kernels import gemv, gemv_table

    if not gemv.HAS_TRITON or gemv.INTERPRETED:
        pytest.skip("needs triton's compiler (not the interpreter)")
    pytest.importorskip("triton.backends.compiler")
    key = next(k for k in gemv_table.PERSISTENT if k[1] == "res")
    text, regs, stack = probe_sass_loop.sass(key, {})
    loop = probe_sass_loop.hot_loop(text)
    assert loop["weight_loads"] and loop["ffma"] and 0 < regs <= 255 and stack == 0


def test_compile_profile_tiny_cpu(tmp_path):
    """One variant in a fresh process: its first call's time, our families' seconds, cProfile's self time by area."""
    import profile_compile

    out = tmp_path / "compile.json"
    assert profile_compile.main(["--tiny", "--device", "cpu", "--variants", "fusion_passes", "--profile", "--top", "5",
                                 "--out", str(out)]) == 0
    (rec,) = json.loads(out.read_text())["records"]
    assert "error" not in rec, rec
    assert rec["first_call_s"] > 0 and rec["graphs"] >= 1
    assert {"attention_sdpa", "qkv_packing"} <= set(rec["pass_s"]) and rec["passes_total_s"] > 0
    assert "inductor" in rec["self_s_by_area"] and len(rec["top_cumulative"]) == 5
    assert profile_compile.area_of("/x/site-packages/torch/_inductor/graph.py") == "inductor"


def test_pdl_preload_probe_register_cap_lowers_the_cap_and_restores_it():
    """--room's ``register_cap``: inside, a persistent config's ``maxnreg`` is the given cap (None: the launch's own)
    and the fixed kernels are compiled afresh; after it, the shipped cap again."""
    import probe_pdl_preload as p
    from fusion_passes.kernels import gemv

    config = dict(PERSIST=6, num_warps=4)
    shipped = gemv._with_register_cap(config)["maxnreg"]
    assert shipped == 80
    with p.register_cap(56):
        assert gemv._with_register_cap(config)["maxnreg"] == 56
        assert gemv._fixed_kernel.cache_info().currsize == 0
    with p.register_cap(None):
        assert gemv._with_register_cap(config)["maxnreg"] == shipped
    assert gemv._with_register_cap(config)["maxnreg"] == shipped
    assert set(p.ROOM_VARIANTS) == {"shipped", "2 blocks", "2 blocks, cap 64", "shipped, cap 56"}
