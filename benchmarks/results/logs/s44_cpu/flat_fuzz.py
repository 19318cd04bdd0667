"""Random flat-scores attention variants (DeBERTa / Bloom-like) vs eager: every fired rewrite must match (session 44).
Run from the repository root: PYTHONPATH=. python benchmarks/results/logs/s44_cpu/flat_fuzz.py LO HI [-v] (seeds LO..HI-1)."""
import random, sys, warnings, math
import torch, torch.nn.functional as F
import fusion_passes

def make(seed):
    r = random.Random(seed)
    B, H, Sq, D = r.choice([1, 2, 3]), r.choice([1, 2, 4]), r.choice([1, 5, 8]), r.choice([8, 16])
    Sk = r.choice([Sq, Sq + 3])
    dtype = r.choice([torch.float32, torch.float32, torch.bfloat16])
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, s, D, generator=g).to(dtype) for s in (Sq, Sk, Sk))
    bias_kind = r.choice(["none", "full", "row", "shared", "2d", "col"])
    shapes = {"full": (B * H, Sq, Sk), "row": (B * H, 1, Sk), "shared": (1, Sq, Sk), "2d": (Sq, Sk), "col": (B * H, Sq, 1)}
    bias = None if bias_kind == "none" else (torch.randn(*shapes[bias_kind], generator=g) * 2).to(dtype)
    kform = r.choice(["div_tensor", "div_float", "mul_tensor", "plain_t", "contig_t", "flat_then_t"])
    vform = r.choice(["view", "contig", "mul"])
    flat_ops = r.sample(["scale", "fill", "cast"], r.randint(0, 2))
    post = r.choice(["fill4", "add4", "none", "where4"])
    allowed = torch.rand(B, 1, Sq, Sk, generator=g) > 0.3
    if r.random() < 0.7:
        allowed[..., 0] = True
    flat_cond = torch.rand(B * H, Sq, Sk, generator=g) > 0.8
    add4 = torch.zeros(B, 1, Sq, Sk, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    c = math.sqrt(D * r.choice([1, 2, 3]))

    def fn(q, k, v, bias, allowed, flat_cond, add4):
        q3 = q.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3).reshape(B * H, Sq, D)
        k3 = k.reshape(B * H, Sk, D)
        if kform == "div_tensor":
            kt = k3.transpose(-1, -2) / torch.tensor(c, dtype=torch.float).to(q.dtype)
        elif kform == "div_float":
            kt = k3.transpose(-1, -2) / c
        elif kform == "mul_tensor":
            kt = k3.transpose(-1, -2) * torch.tensor(1 / c).to(q.dtype)
        elif kform == "plain_t":
            kt = k3.transpose(1, 2)
        elif kform == "contig_t":
            kt = k3.transpose(1, 2).contiguous()
        else:
            kt = k.transpose(-1, -2).reshape(B * H, D, Sk)
        v3 = {"view": lambda: v.reshape(B * H, Sk, D), "contig": lambda: v.transpose(2, 3).contiguous().transpose(2, 3).reshape(B * H, Sk, D),
              "mul": lambda: v.reshape(B * H, Sk, D) * 1.0}[vform]()
        s = torch.bmm(q3, kt)
        for op in flat_ops:
            if op == "scale":
                s = s * 0.5
            elif op == "fill":
                s = s.masked_fill(flat_cond, torch.finfo(s.dtype).min)
            elif op == "cast" and s.dtype != torch.float32:
                s = s.float()
        if bias is not None:
            s = s + bias
        s = s.view(B, H, Sq, Sk)
        if post == "fill4":
            s = s.masked_fill(~allowed, torch.finfo(s.dtype).min)
        elif post == "add4":
            s = s + add4.to(s.dtype)
        elif post == "where4":
            s = torch.where(allowed, s, torch.finfo(s.dtype).min)
        p = F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.bmm(p.view(B * H, Sq, Sk), v3).view(B, H, Sq, D)

    desc = dict(B=B, H=H, Sq=Sq, Sk=Sk, D=D, dtype=str(dtype), bias=bias_kind, k=kform, v=vform, flat=flat_ops, post=post)
    return fn, (q, k, v, bias, allowed, flat_cond, add4), dtype, desc

fired = bad = 0
lo, hi = int(sys.argv[1]), int(sys.argv[2])
for seed in range(lo, hi):
    fn, args, dtype, desc = make(seed)
    torch._dynamo.reset()
    with torch.no_grad():
        ref = fn(*args)
        exact = fn(*(a.double() if a is not None and a.is_floating_point() else a for a in args)) if dtype != torch.float32 else None
        with fusion_passes.capture() as recs, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = torch.compile(fn, backend=fusion_passes.backend(patterns=["attention_sdpa"]))(*args)
    m = [x for r in recs for x in r.matches]
    errs = [e for r in recs for e in r.errors]
    nm = [n.reason for r in recs for n in r.near_misses]
    same_nan = torch.equal(torch.isnan(out), torch.isnan(ref))
    err = (out.float() - ref.float()).nan_to_num().abs().max().item()
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    ok = same_nan and (err <= tol)
    if not ok and exact is not None:  # bf16: ours no farther from fp64 than eager (x1.5)
        e_ours = (out.double() - exact).nan_to_num().abs().max().item(); e_eager = (ref.double() - exact).nan_to_num().abs().max().item()
        ok = same_nan and e_ours <= 1.5 * e_eager + 1e-3
    fired += bool(m)
    if errs or not ok:
        bad += 1
        print("BAD", seed, desc, "err", err, "nan_same", same_nan, "fired", bool(m), errs[:1], nm[:2])
    elif "-v" in sys.argv:
        print(seed, "fired" if m else "miss", desc if not m else "", nm[:1] if not m else m[0].detail["mask"])
print(f"seeds {lo}-{hi}: fired {fired}, bad {bad}")
