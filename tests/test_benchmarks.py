"""CPU smoke test of the benchmark harness: it runs, and its JSON has the fields results are compared by."""

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_e2e  # noqa: E402

FIELDS = {"model", "attn", "workload", "variant", "median_ms", "kernels", "peak_mem_gib", "compile_s", "max_err"}


def test_e2e_harness_tiny_cpu(tmp_path):
    out = tmp_path / "res.json"
    assert bench_e2e.main(["--tiny", "--device", "cpu", "--attn", "eager", "--workloads", "decode-16", "--variants", "eager",
                           "fusion_passes", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"device", "torch", "triton", "transformers"} <= set(data["environment"])
    recs = data["records"]
    assert [r["variant"] for r in recs] == ["eager", "fusion_passes"]
    for r in recs:
        assert FIELDS <= set(r) and "error" not in r, r
        assert r["median_ms"] > 0 and r["max_err"] < 1e-3


def test_decode_profile_tiny_cpu(tmp_path):
    import profile_decode

    out = tmp_path / "prof.json"
    assert profile_decode.main(["--tiny", "--device", "cpu", "--variants", "fusion_passes", "--out", str(out)]) == 0
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["variant"] == "fusion_passes" and rec["workload"] == "decode-16"
    shares = [k["share"] for k in rec["kernels"]]
    assert shares == sorted(shares, reverse=True) and abs(sum(shares) - 1) < 0.01
    assert any("packed_linear" in k["kernel"] for k in rec["kernels"])  # the packed projections ran


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
