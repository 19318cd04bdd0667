"""Runtime ops that pattern families insert into graphs (custom ops with fake implementations)."""


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
