"""A copy of the working tree (as git sees it: tracked and untracked-but-not-ignored files) for
tests that run make or Snakemake in a directory of their own, sharing this checkout's .venv."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# build outputs of the checkout that a copy must not start from
SKIPPED = {"results", "logs", ".snakemake"}


def copy_worktree(dest: Path) -> Path:
    """Copy the working tree into `dest` (build outputs left out), link .venv; return `dest`."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, files.split("\0")):
        if rel.split("/", 1)[0] in SKIPPED or not (ROOT / rel).is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    (dest / ".venv").symlink_to(ROOT / ".venv")
    return dest
