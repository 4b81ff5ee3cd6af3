"""benchmarks/_sustained.py: nvidia-smi's samples parsed and settled (no GPU needed)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _sustained import parse_smi, settled, sustained  # noqa: E402


def test_parse_smi_keeps_three_number_lines():
    text = "1980, 120.5, 40\n1425, 697.3, 58\n[N/A], 12.0, 40\n1410, 69"
    assert parse_smi(text) == [(1980.0, 120.5, 40.0), (1425.0, 697.3, 58.0)]


def test_settled_skips_the_ramp():
    samples = [(1980.0, 300.0, 40.0)] * 2 + [(1410.0, 698.0, 57.0)] * 6
    assert settled(samples) == (1410.0, 698.0, 57.0)
    assert settled([]) == (None, None, None)


def test_sustained_counts_calls_without_nvidia_smi(monkeypatch):
    import _sustained

    monkeypatch.setattr(_sustained.shutil, "which", lambda name: None)
    calls = []
    s = sustained(lambda: calls.append(1), 0.01, lambda: None, batch=5)
    assert len(calls) % 5 == 0 and len(calls) >= 5
    assert s.us_per_call > 0 and s.sm_mhz is None and s.watts is None
