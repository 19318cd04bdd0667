"""graph_utils: the graph walks the families share."""

import pytest
import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from fusion_passes import graph_utils


def _two_layers(x):
    """One model-level table, sliced and expanded the same way by two "layers" (as HF does with its mask)."""
    t = (x * 2).exp()
    a = t.unsqueeze(0).expand(3, -1, -1)
    b = t.unsqueeze(0).expand(3, -1, -1)
    return a + 1, b + 1


@pytest.mark.parametrize("expand", [True, False])
def test_materialise_shared_gives_equal_values_one_buffer_even_when_expanded(expand):
    """Equal values (by structure) share one materialised node; an overlapping layout (stride 0 after an expand)
    gets a dense one, which can be written (fake-tensor propagation and eager both copy into it)."""
    gm = make_fx(_two_layers)(torch.randn(4, 5))
    adds = [n for n in gm.graph.nodes if n.target is torch.ops.aten.add.Tensor]
    shared: dict = {}
    made = []
    for add in adds:
        value = add.args[0] if expand else add.args[0].args[0]  # the expand, or the unsqueeze under it
        node, new = graph_utils.materialise_shared(gm.graph, value, add, shared)
        made += new
        add.replace_input_with(add.args[0], node if expand else
                               gm.graph.call_function(torch.ops.aten.expand.default, (node, [3, -1, -1])))
        if not expand:  # keep the graph in order: the new expand before its add
            add.prepend(add.args[0])
    assert len(made) == 1 and len(shared) == 1
    stride = made[0].args[1]
    assert 0 not in stride and made[0].meta["val"].stride() == tuple(stride)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    x = torch.randn(4, 5)
    for got, want in zip(gm(x), _two_layers(x)):
        torch.testing.assert_close(got, want)
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    FakeTensorProp(gm, FakeTensorMode()).propagate(x)  # what failed on the H200 for an expanded mask


def test_structure_tells_apart_different_values():
    gm = make_fx(lambda x: ((x * 2).exp(), (x * 3).exp()))(torch.randn(4))
    exps = [n for n in gm.graph.nodes if n.target is torch.ops.aten.exp.default]
    assert graph_utils.structure(exps[0]) != graph_utils.structure(exps[1])
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert graph_utils.structure(placeholders[0]) is placeholders[0]  # inputs by identity


def test_mutates_reads_the_schema():
    g = fx.Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    copy = g.call_function(torch.ops.aten.copy_.default, (a, b))
    foreach = g.call_function(torch.ops.aten._foreach_add_.Scalar, ([a, b], 1))
    add = g.call_function(torch.ops.aten.add.Tensor, (a, b))
    assert graph_utils.mutates(copy, a) and not graph_utils.mutates(copy, b)
    assert graph_utils.mutates(foreach, b) and not graph_utils.mutates(add, a)


def _with_size_query_on(gm: fx.GraphModule, node: fx.Node, dim: int, like: fx.Node) -> fx.Node:
    """Insert ``sym_size(node, dim)`` after ``node``, valued as ``like`` (the query the graph already makes)."""
    with gm.graph.inserting_after(node):
        query = gm.graph.call_function(torch.ops.aten.sym_size.int, (node, dim))
    query.meta["val"] = like.meta["val"]
    like.replace_all_uses_with(query)
    gm.graph.erase_node(like)
    return query


def test_read_sizes_early_moves_size_queries_off_intermediates():
    """A size query on an intermediate (one more user of it) reads an input's dim of the same size instead; one
    whose size a SymInt node already holds is replaced by that node; the values stay the same."""
    def f(x, w):
        y = x @ w
        return y * x.shape[0] + w.shape[1]

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(6, 4), torch.randn(4, 8))
    mm = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.mm.default)
    queries = {n.args[0].name: n for n in gm.graph.nodes if n.target is torch.ops.aten.sym_size.int}
    on_rows = _with_size_query_on(gm, mm, 0, queries["x_1"])  # y.shape[0]: x's rows
    with gm.graph.inserting_after(on_rows):  # y.shape[1] asked again, after w.shape[1] was
        again = gm.graph.call_function(torch.ops.aten.sym_size.int, (mm, 1))
    again.meta["val"] = queries["w_1"].meta["val"]
    queries["w_1"].replace_all_uses_with(again)
    gm.graph.erase_node(queries["w_1"])
    w_cols = gm.graph.call_function(torch.ops.aten.sym_size.int, (next(iter(gm.graph.nodes)).next, 1))
    again.prepend(w_cols)
    w_cols.meta["val"] = again.meta["val"]
    gm.graph.lint()
    assert len(mm.users) == 3

    assert graph_utils.read_sizes_early(gm.graph) == 2
    gm.graph.lint()
    gm.recompile()
    assert list(mm.users) == [next(n for n in gm.graph.nodes if n.target is torch.ops.aten.mul.Tensor)]
    assert on_rows.args[0].name == "x_1" and again not in gm.graph.nodes
    x, w = torch.randn(5, 4), torch.randn(4, 3)
    torch.testing.assert_close(gm(x, w), f(x, w))
    assert graph_utils.read_sizes_early(gm.graph) == 0  # nothing left to move


def test_read_sizes_early_never_reads_a_gradient_in_a_joint_graph():
    """Training under dynamic shapes: the forward asks a view for its ``-1`` dim, which no earlier SymInt holds
    but the output's gradient (a ``tangents_*`` input, first in the joint graph) does. Pointed there, the forward
    would depend on the backward and the partitioner failed ("Node view_2 was invalid, but is output")."""
    import fusion_passes

    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 32)

    def patches(x):  # [batch, tokens, features] -> tokens * features / 8 patches of 8
        return lin(x.reshape(x.shape[0], -1, 8))

    torch._dynamo.reset()
    compiled = torch.compile(patches, backend=fusion_passes.backend(), dynamic=True)
    with fusion_passes.capture() as recs:
        for shape in [(2, 4, 16), (3, 6, 4)]:
            x = torch.randn(*shape, requires_grad=True)
            x_ref = x.detach().clone().requires_grad_()
            out = compiled(x)
            out.sum().backward()
            expected = patches(x_ref)
            expected.sum().backward()
            torch.testing.assert_close(out, expected)
            torch.testing.assert_close(x.grad, x_ref.grad)
    assert recs and all(not r.errors for r in recs), [r.errors for r in recs]
    assert any(r.passes_ran for r in recs)


def test_read_sizes_early_leaves_forward_queries_off_tangents():
    """The joint graph itself: the forward's query on the view keeps reading the view (or another forward
    value), never the tangent, though the tangent comes first and has a dim of that size."""
    def joint(x, tangents_1):
        y = x.reshape(x.shape[0], -1, 8)
        return y * y.shape[1], tangents_1 * 2

    gm = make_fx(joint, tracing_mode="symbolic")(torch.randn(2, 4, 16), torch.randn(2, 8, 8))
    tangent = next(n for n in gm.graph.nodes if n.op == "placeholder" and "tangents" in n.name)
    view = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.view.default)
    tangent.meta["val"] = view.meta["val"]  # as in a joint graph: the gradient has the output's symbolic sizes
    query = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.sym_size.int and n.args[0] is view)
    graph_utils.read_sizes_early(gm.graph)
    gm.graph.lint()
    assert query.args[0] is not tangent, gm.code


def test_restore_puts_back_a_graph_left_with_a_node_used_before_it_is_defined():
    """The graphs restore exists for are the broken ones: a family that raised after moving a node past its user."""
    gm = make_fx(lambda x: (x.sin() + 1).cos())(torch.randn(4))
    graph = gm.graph
    saved = graph_utils.snapshot(graph)
    sin, add, _cos = [n for n in graph.nodes if n.op == "call_function"]
    add.append(sin)  # sin now comes after add, its user: graph.lint() would reject this graph
    with pytest.raises(RuntimeError):
        graph.lint()
    graph_utils.restore(graph, saved)
    graph.lint()
    assert [(n.op, n.target) for n in graph.nodes] == [(n.op, n.target) for n in saved.nodes]
    gm.recompile()
    x = torch.randn(4)
    torch.testing.assert_close(gm(x), (x.sin() + 1).cos())
