"""Test-only pattern families exercising the registry and the pass manager.

toy_mul2_to_add (post_grad):  y = mul(x, 2)          ->  y = add(x, x)
toy_broken      (post_grad):  rewrites the first mul into a value used before it is defined, then raises (the
                              manager must roll it back)
toy_uncompilable (post_grad): y = mul(x, 2)          ->  y = _times_two(x), a call Inductor cannot lower
"""

import torch

aten = torch.ops.aten


def _rewrite_mul2(graph, ctx, replacement):
    """Each ``mul(x, 2)`` -> the node ``replacement(graph, x)`` inserts; other muls are near misses."""
    for node in list(graph.nodes):
        if node.target is aten.mul.Tensor and len(node.args) == 2 and node.args[1] == 2:
            if not isinstance(node.args[0], torch.fx.Node):
                ctx.near_miss(node, "first operand is not a tensor")
                continue
            with graph.inserting_before(node):
                new = replacement(graph, node.args[0])
            new.meta.update(node.meta)
            node.replace_all_uses_with(new)
            graph.erase_node(node)
            ctx.matched([node], [new])
        elif node.target is aten.mul.Tensor:
            ctx.near_miss(node, "multiplier is not the constant 2")


class ToyMul2ToAdd:
    NAME = "toy_mul2_to_add"
    HOOK = "post_grad"
    DESCRIPTION = "mul(x, 2) -> add(x, x) (test only)"

    @staticmethod
    def apply(graph, ctx):
        _rewrite_mul2(graph, ctx, lambda g, x: g.call_function(aten.add.Tensor, (x, x)))


class ToyBroken:
    NAME = "toy_broken"
    HOOK = "post_grad"
    DESCRIPTION = "raises after a partial rewrite (test only)"

    @staticmethod
    def apply(graph, ctx):
        for node in list(graph.nodes):
            if node.target is aten.mul.Tensor:
                # after the mul's first user: left like this the graph uses a value before defining it, the
                # state a family that raised midway can leave, which the manager's rollback must still undo
                with graph.inserting_after(next(iter(node.users))):
                    new = graph.call_function(aten.sub.Tensor, node.args)
                node.replace_all_uses_with(new)
                graph.erase_node(node)
                ctx.matched([node], [new])
                break
        raise RuntimeError("toy failure after a partial rewrite")


def _times_two(x):
    return x * 2


class ToyUncompilable:
    NAME = "toy_uncompilable"
    HOOK = "post_grad"
    DESCRIPTION = "a correct rewrite Inductor then fails to compile (test only)"

    @staticmethod
    def apply(graph, ctx):
        _rewrite_mul2(graph, ctx, lambda g, x: g.call_function(_times_two, (x,)))
