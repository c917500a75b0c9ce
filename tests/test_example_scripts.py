"""Scripts in examples/ run and write what they say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_embedding_scatter_script_saves_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("sklearn")
    target = tmp_path / "mve.png"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "embedding_scatter.py"), str(target), "24"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert f"embedding plot written to {target}" in out.stdout
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 5000
