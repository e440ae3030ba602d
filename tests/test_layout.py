"""Package hygiene: importing iclr25 loads no method; experiments/ is not importable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_iclr25_loads_no_method_and_no_torch() -> None:
    code = (
        "import sys, iclr25; "
        "assert not [m for m in sys.modules if m.startswith('iclr25.methods')], 'method loaded'; "
        "assert 'torch' not in sys.modules, 'torch loaded'; print(iclr25.__version__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_experiments_cannot_be_imported() -> None:
    assert (ROOT / "experiments").is_dir()
    assert not (ROOT / "experiments" / "__init__.py").exists()
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('experiments') is not None)"
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True)
    assert out.returncode == 0
    for path in (ROOT / "src").rglob("*.py"):
        text = path.read_text()
        assert "import experiments" not in text and "from experiments" not in text, path
