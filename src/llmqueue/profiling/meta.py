"""Provenance of a measurement run (``meta.json`` beside the CSVs)."""

from __future__ import annotations

import datetime as _dt
import os
import platform
from typing import Any


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def environment(device: str) -> dict[str, Any]:
    """Hardware and software of this machine: CPU/GPU name, core count, torch/transformers versions."""
    import torch
    import transformers

    env: dict[str, Any] = {
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        env["gpu"] = props.name
        env["gpu_memory_gib"] = round(props.total_memory / (1 << 30), 2)
        env["cuda"] = torch.version.cuda
    return env


def now_utc() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
