"""The byte and time labels every page and plot writes (lab.plots.units)."""
import pytest

from lab.plots.units import bytes_label, seconds_label, si_bytes_label


@pytest.mark.parametrize("b, text", [(8, "8 B"), (1 << 10, "1 kB"), (4 << 20, "4 MB"), (1 << 30, "1 GB"),
                                     (3 << 19, "1.5 MB"), (1023, "1023 B")])
def test_bytes_label_counts_binary_multiples(b, text):
    assert bytes_label(b) == text


@pytest.mark.parametrize("b, text", [(999, "999 B"), (1000, "1 kB"), (215_345, "215 kB"), (12_345_678, "12.3 MB"),
                                     (2.5e9, "2.5 GB")])
def test_si_bytes_label_counts_powers_of_1000(b, text):
    assert si_bytes_label(b) == text


@pytest.mark.parametrize("us, text", [(10, "10 µs"), (1500, "1.5 ms"), (2e6, "2 s")])
def test_seconds_label(us, text):
    assert seconds_label(us) == text
