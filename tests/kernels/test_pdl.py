"""``kernels.pdl``: when a pass may launch a decode kernel with programmatic dependent launch."""

import pytest
import torch

from fusion_passes.kernels import pdl


def test_no_pdl_without_a_gpu_that_has_it():
    """CPU tensors, and CUDA devices where no CUDA runtime answers (fake CUDA tensors here) or below sm_90, never get
    PDL; asking does not raise."""
    for device in (torch.device("cpu"), torch.device("cuda"), torch.device("cuda", 0)):
        assert not pdl.supported(device) or torch.cuda.get_device_capability(device) >= (9, 0)
    assert not pdl.supported(torch.device("cpu"))


@pytest.mark.parametrize("policy, graphed, want", [("off", True, False), ("auto", True, True), ("auto", False, False),
                                                   ("on", False, True)])
def test_policy_decides_where_the_gpu_has_it(policy, graphed, want, monkeypatch):
    monkeypatch.setenv(pdl.POLICY_ENV, policy)
    monkeypatch.setattr(pdl, "supported", lambda device: True)
    assert pdl.wanted(torch.device("cuda"), graphed) == want
    assert not pdl.wanted(torch.device("cpu"), graphed)
    monkeypatch.setattr(pdl, "supported", lambda device: False)
    assert not pdl.wanted(torch.device("cuda"), graphed)


def test_default_is_auto_and_a_bad_value_names_the_choices(monkeypatch):
    monkeypatch.delenv(pdl.POLICY_ENV, raising=False)
    assert pdl.policy() == "auto"
    monkeypatch.setenv(pdl.POLICY_ENV, "yes")
    with pytest.raises(ValueError, match="FUSION_PASSES_PDL='yes'; use one of auto, off, on"):
        pdl.policy()


def test_graphed_compile_nests_and_restores():
    assert not pdl.compiling_for_graphs()
    with pdl.graphed_compile():
        assert pdl.compiling_for_graphs()
        with pdl.graphed_compile(False):
            assert not pdl.compiling_for_graphs()
        assert pdl.compiling_for_graphs()
    assert not pdl.compiling_for_graphs()
