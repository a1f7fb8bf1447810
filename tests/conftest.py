import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def azure_trace(root: Path) -> Path:
    return root / "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"
