"""Runtime ops that pattern families insert into graphs (custom ops with fake implementations)."""

# Passed at every launch of our Triton kernels. Left unset, Triton's default decides whether a product and the add it
# feeds round once (an FMA) or twice: on up to Triton 3.9 (which warns that it is unset), off from 3.10. Every GPU
# figure and test of these kernels ran with it on, and Inductor requests it for its own kernels. Inductor's code for
# a traced user kernel passes it on from torch 2.15; 2.11 - 2.14 drop it there (Tritons up to 3.9 default to
# on).
LAUNCH_OPTIONS = {"enable_fp_fusion": True}


def launch_options(with_pdl: bool = False) -> dict:
    """A launch's keyword arguments: ``LAUNCH_OPTIONS``, and programmatic dependent launch where the caller chose it
    (``kernels.pdl``; Triton's own launcher only, never through ``wrap_triton``)."""
    return {**LAUNCH_OPTIONS, "launch_pdl": True} if with_pdl else dict(LAUNCH_OPTIONS)


def is_interpreted(kernel) -> bool:
    """Whether the Triton ``kernel`` (a JITFunction, as the module defined it) runs in Triton's interpreter:
    ``TRITON_INTERPRET=1`` was set before triton was imported. Then it also runs on CPU tensors (the tests)."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # no triton, or one without the interpreter
        return False
    return isinstance(kernel, InterpretedFunction)


def ieee_fp32_dot(dtype) -> bool:
    """Whether a ``tl.dot`` on ``dtype`` inputs must run in full fp32 (``input_precision="ieee"``). Triton's
    default for fp32 is TF32, which eager's fp32 matmuls use only when the user allows it
    (``torch.backends.cuda.matmul.allow_tf32`` / ``torch.set_float32_matmul_precision("high")``); Inductor keys
    its cache on that setting too. Other dtypes ignore the precision."""
    import torch

    return dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32
