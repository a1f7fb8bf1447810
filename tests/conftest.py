import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
os.environ.setdefault("MPLBACKEND", "Agg")
# The shared helpers at the top of tests/ (worktree.py, reference_engine.py) are imported by bare
# name from test files in every folder (tests/README.md); pytest puts only each test file's own
# folder on sys.path, so this one is added here, before any test module is imported.
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def azure_trace(root: Path) -> Path:
    return root / "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"
