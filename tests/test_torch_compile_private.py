"""lab/codecs/torch_compile_private.py: the torch.compile settings the codecs' fused CPU passes rely on."""
from __future__ import annotations

import torch

from lab.codecs import torch_compile_private as adapter


def test_the_recompile_limit_is_raised_and_a_higher_one_stands():
    import torch._dynamo

    config = torch._dynamo.config
    assert isinstance(getattr(config, "recompile_limit", None), int), \
        f"torch {torch.__version__}: torch._dynamo.config.recompile_limit is gone"
    with config.patch(recompile_limit=3):
        adapter.raise_recompile_limit(17)
        assert config.recompile_limit == 17
        adapter.raise_recompile_limit(5)
        assert config.recompile_limit == 17


def test_rows_marked_dynamic_compile_once_for_every_row_count():
    import torch._dynamo

    frames = []

    def backend(gm, example_inputs):
        frames.append([tuple(t.shape) for t in example_inputs if isinstance(t, torch.Tensor)])
        return gm.forward

    fn = torch.compile(lambda x: x * 2 + 1, backend=backend)
    torch._dynamo.reset()
    for rows in (5, 9, 13):
        x = torch.ones(rows, 3)
        adapter.mark_rows_dynamic(x)
        assert torch.equal(fn(x), x * 2 + 1)
    torch._dynamo.reset()
    assert len(frames) == 1, f"torch {torch.__version__}: maybe_mark_dynamic no longer spares a recompile: {frames}"


def test_one_compile_thread_sets_and_restores_inductor_s_workers():
    from torch._inductor import config

    before = config.compile_threads
    with adapter.one_compile_thread():
        assert config.compile_threads == 1
    assert config.compile_threads == before


def test_the_vector_isa_probe_is_there():
    from torch._inductor import cpu_vec_isa

    assert callable(getattr(cpu_vec_isa, "valid_vec_isa_list", None)), \
        f"torch {torch.__version__}: torch._inductor.cpu_vec_isa.valid_vec_isa_list is gone"
