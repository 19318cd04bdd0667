"""Runtime ops that pattern families insert into graphs (custom ops with fake implementations)."""


def is_interpreted(kernel) -> bool:
    """Whether the Triton ``kernel`` (a JITFunction, as the module defined it) runs in Triton's interpreter:
    ``TRITON_INTERPRET=1`` was set before triton was imported. Then it also runs on CPU tensors (the tests)."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # no triton, or one without the interpreter
        return False
    return isinstance(kernel, InterpretedFunction)
