"""The Operators page as a lesson (Ben-Nun & Hoefler 2018): it asks which method multiplies least before it
shows the survey's counts, reveals the answer computed for the layer on screen, says why a method cannot compute
a layer, and its timing run checks each method against F.conv2d and splits the batch (µ-cuDNN)."""
import re

from test_app import metric, page


def _texts(at) -> str:
    return " ".join(m.value for m in [*at.markdown, *at.success])


def test_predict_first_then_the_counts_for_this_layer_and_a_timing_run_that_checks_each_method():
    at = page("operators")
    assert not at.exception
    assert metric(at, "Fewest multiplications, this layer") == "?" and "Multiplications here" not in _texts(at)
    assert "For a 3×3 kernel, which method does the fewest multiplications?" in _texts(at)
    assert "Fully connected: 1024→1024 features, batch 8" in [s.value for s in at.subheader]
    at.radio(key="w_guess").set_value("FFT (torch.fft)").run()
    assert not at.exception
    said = " ".join(w.value for w in at.warning)
    # the default layer (8 x 32→32 x 32x32, padding 1): Winograd 16 products per 2x2 tile, 0.45x direct's
    assert "Not quite" in said and "direct 75,500,000" in said and "16 products instead of 36" in said
    assert "the page computes Winograd F(2×2, 3×3)" in said
    assert metric(at, "Fewest multiplications, this layer") == "Winograd F(2×2, 3×3)" and metric(at, "Threads at once here")
    assert "Winograd F(2×2, 3×3) does the fewest multiplications here, 0.45x direct's" in _texts(at)
    assert "multiplies direct's W by 8 and adds 3 steps to D" in _texts(at)

    at = page("operators", guess="skip", n="4", c_in="3", c_out="4", h="8", w="8", splits="2", repeats="3", limit_kb="1")
    next(b for b in at.button if b.label == "Time the methods").click()
    at = at.run()
    assert not at.exception and not at.error
    assert any("Every method equals F.conv2d within 0.0001" in s.value for s in at.success)
    take = _texts(at)
    assert "Measured: the fastest of the methods timed is" in take and "Split into 2 micro-batches, its workspace falls to 0.50x" in take
    assert "µ-cuDNN's choice under 1 kB:** nothing measured fits" in take  # the smallest workspace here is 1.5 kB
    at = at.number_input(key="w_limit_kb").set_value(1e6).run()
    # no limit: the fastest of every method and split, so never slower than the fastest whole-batch run
    ratio = re.search(r"µ-cuDNN's choice under 1e\+06 kB:\*\* .*?, ([\d.]+)x the time of the fastest", _texts(at))
    assert ratio and float(ratio.group(1)) <= 1.0


def test_a_kernel_winograd_cannot_compute_is_said_in_its_row_and_a_wide_layer_favours_fft():
    at = page("operators", guess="skip", k="5", padding="2")
    assert not at.exception and not at.error
    text = _texts(at)
    assert "Not possible because" in text and "winograd F(2x2, 3x3) needs a 3x3 kernel and stride 1" in text
    at = page("operators", guess="skip", k="3", stride="2", more="true")
    assert "fft convolution computes stride 1 only" in _texts(at)
    # a wide layer: FFT's pointwise products (about 2 per output and channel pair) beat Winograd's 4; too big to time
    at = page("operators", guess="direct", n="8", c_in="512", c_out="512", h="32", w="32", k="3")
    said = " ".join(w.value for w in at.warning)
    assert "the page computes FFT (torch.fft)" in said and "outweigh its transforms" in said
    assert any("would take minutes on this CPU" in c.value for c in at.caption)
    assert not [b for b in at.button if b.label == "Time the methods"]
