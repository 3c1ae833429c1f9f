"""Bad input found by the generated sweep (tests/test_cli_sweep.py) and by review, each checked where the
UIs share it (lab.experiments), before any work: what was wrong and what is allowed, in one line."""
from __future__ import annotations

import pytest

from lab.data.images import DataError, load_dataset
from lab.experiments import check_dataset, converge_config


@pytest.mark.parametrize("settings, message", [
    (dict(specs=["fp32"], algorithm="nonsense"), "unknown algorithm 'nonsense'; known: native, "),
    (dict(mode="ddp", specs=["fp32"], algorithm="nonsense"), "unknown algorithm 'nonsense'"),
    (dict(mode="ddp", algorithm="native", specs=["fp32", "dynamic_tree"]),
     "'dynamic_tree' cannot train with the DDP hook: the native all_reduce carries fp32 only"),
    (dict(mode="ddp", specs=["fp32", "ef:powersgd"]), "powersgd keeps its own error feedback"),
], ids=["sim algorithm", "ddp algorithm", "ddp native with a codec", "ddp ef:powersgd"])
def test_converge_refuses_before_fp32_trains(settings, message):
    """What a DDP rank would refuse after fp32 had trained (and a name fp32 alone never uses, which the
    result would record) is refused by the config, before anything trains."""
    with pytest.raises(ValueError) as e:
        converge_config(**settings)
    assert message in str(e.value)


def test_converge_takes_native_with_fp32_alone_in_ddp():
    assert converge_config(mode="ddp", algorithm="native", specs=["fp32"]).algorithm == "native"


def test_an_empty_data_folder_names_where_it_looked(tmp_path):
    """'auto' looks for MNIST, then Fashion-MNIST, in the folder given (and only there)."""
    for name, looked in (("auto", ["mnist", "MNIST/raw", "fashion-mnist", "FashionMNIST/raw"]),
                         ("fashion-mnist", ["fashion-mnist", "FashionMNIST/raw"])):
        for check in (lambda: load_dataset(name, path=tmp_path), lambda: check_dataset(name, tmp_path)):
            with pytest.raises(DataError) as e:
                check()
            msg = str(e.value)
            assert msg.startswith(f"no {'mnist or fashion-mnist' if name == 'auto' else name} IDX files found; "
                                  f"looked in: {tmp_path}, ")
            assert all(str(tmp_path / d) in msg for d in looked), msg


def test_check_dataset_without_locating_checks_the_name():
    assert check_dataset("mnist", locate=False) == "mnist"  # the name alone: no files looked for
    with pytest.raises(DataError, match="unknown data set 'abc'; known: auto, mnist, fashion-mnist, digits"):
        check_dataset("abc", locate=False)
