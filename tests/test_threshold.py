"""Strom's threshold codec (Interspeech 2015): entries with |g| >= tau sent as +-tau, the rest
kept by error feedback; its bytes; its options' errors."""
from __future__ import annotations

import pytest
import torch

from lab.codecs import ErrorFeedback, get_codec
from lab.codecs.registry import parse_spec
from lab.codecs.wire import WireFormat


def test_entries_over_tau_are_sent_as_plus_minus_tau():
    x = torch.tensor([0.1, -3.0, 2.0, -0.5, 1.99, 5.0, -2.0, 0.0])
    codec = get_codec("threshold", tau=2.0, relative=False, capacity=1.0)
    enc = codec.encode(x)
    y = codec.decode(enc)
    assert torch.equal(y, torch.tensor([0.0, -2.0, 2.0, 0.0, 0.0, 2.0, -2.0, 0.0]))
    assert enc.meta["sent"] == 4
    assert enc.wire_bytes == 4 * 8 + 4  # one int32 word per slot (sign and index) + the float32 tau


def test_relative_tau_is_in_rms_units_and_the_bytes_follow_the_capacity():
    g = torch.randn(10_000, generator=torch.Generator().manual_seed(1)) * 1e-3
    codec = get_codec("threshold", tau=2.5)  # relative to the RMS by default
    enc = codec.encode(g)
    rms = float(g.double().pow(2).mean().sqrt())
    assert float(enc.tensors["tau"]) == pytest.approx(2.5 * rms, rel=1e-6)
    # a Gaussian reaches 2.5 sigma with probability 1.24 %: well inside the 5 % capacity
    assert 90 <= enc.meta["sent"] <= 160
    assert enc.wire_bytes == 4 * 500 + 4 and WireFormat.of(codec, 10_000).nbytes == enc.wire_bytes
    assert enc.wire_bytes < 4 * 10_000 / 19  # 19x fewer bytes than fp32


def test_a_full_message_keeps_the_largest_and_error_feedback_carries_the_rest():
    x = torch.arange(1.0, 11.0)  # all 10 reach tau=0.5; 2 slots
    codec = ErrorFeedback(get_codec("threshold", tau=0.5, relative=False, capacity=0.2))
    y = codec.decode(codec.encode(x))
    assert torch.equal(y.nonzero().flatten(), torch.tensor([8, 9])) and torch.equal(y[8:], torch.tensor([0.5, 0.5]))
    assert torch.allclose(codec.residual(), x - y)


def test_with_error_feedback_sent_plus_residual_is_the_sum_of_the_inputs():
    gen = torch.Generator().manual_seed(0)
    codec = parse_spec("ef:threshold:tau=1.5")
    total, sent = torch.zeros(2000, dtype=torch.float64), torch.zeros(2000, dtype=torch.float64)
    for _ in range(20):
        g = torch.randn(2000, generator=gen)
        total += g
        sent += codec.decode(codec.encode(g)).double()
    assert torch.allclose(sent + codec.residual().double(), total, atol=1e-4)
    assert float(sent.abs().sum()) > 0.3 * float(total.abs().sum())  # the residual is released, not hoarded


@pytest.mark.parametrize("spec, message", [
    ("threshold:tau=0", "tau=0.0; allowed: a finite number > 0"),
    ("threshold:tau=-1", "option tau=-1.0; allowed:"),
    ("threshold:capacity=0", "capacity=0.0; allowed: a number in (0, 1]"),
    ("threshold:capacity=2", "option capacity=2.0; allowed:"),
])
def test_a_bad_option_is_a_one_line_error_naming_the_allowed_range(spec, message):
    with pytest.raises(ValueError) as e:
        parse_spec(spec)
    assert message in str(e.value) and "\n" not in str(e.value)
