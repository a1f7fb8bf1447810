"""The recipes of docs/architecture.md ("Where new things go") for a queue order, a router and a
trace format, each built in a copy of the working tree with exactly the files the recipe names,
then checked by the suite's own tests of that kind of thing, which take the orders, routers and
formats from the registries: a toy order (shortest prompt first, a new key, 3 files), a toy
router (round robin in reverse, 3 files) and a toy trace format (a CSV of ``time_s``,
``input_tokens``, ``output_tokens``, 2 files).

Each recipe is a list of edits (file, text found, text put in its place). The test fails when a
recipe edits a file its paragraph of docs/architecture.md does not name, when it takes more
files than its target, when an edit's anchor is gone from the code (the recipe, and so the docs,
must follow the code), and when the suite's checks of the toys fail: the registry checks of
tests/core/test_policy.py, the event-by-event comparison with the reference engine of the toy
order and the toy router, and every test of tests/traces/test_formats.py on the toy format but
the continuous-batching replay (its kernels take minutes to compile in a fresh copy).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from worktree import ROOT, copy_worktree

pytestmark = pytest.mark.slow

Edit = tuple[str, str, str]  # (file, text found, text put in its place)

ORDER: list[Edit] = [
    (
        "src/llmqueue/policy.py",
        '"remaining_size", "predicted_remaining")',
        '"remaining_size", "predicted_remaining", "prompt")',
    ),
    (
        "src/llmqueue/policy.py",
        'SPRPT_ORDER = QueueOrder("sprpt", "predicted_remaining", True, True, None)\n',
        'SPRPT_ORDER = QueueOrder("sprpt", "predicted_remaining", True, True, None)\n'
        'SPF_ORDER = QueueOrder("spf", "prompt", False, False, None)  # shortest prompt first\n',
    ),
    (
        "src/llmqueue/policy.py",
        "SPRPT_ORDER,\n)  # fmt: skip",
        "SPRPT_ORDER, SPF_ORDER,\n)  # fmt: skip",
    ),
    ("src/llmqueue/sim/queue.py", "    SPRPT_ORDER,\n", "    SPRPT_ORDER,\n    SPF_ORDER,\n"),
    (
        "src/llmqueue/sim/queue.py",
        "COMPILED_ORDERS = (FCFS, SJF, SPJF, PSJF, SRPT, PSPJF, SPRPT)",
        "SPF = SPF_ORDER.code\nCOMPILED_ORDERS = (FCFS, SJF, SPJF, PSJF, SRPT, PSPJF, SPRPT, SPF)",
    ),
    (
        "src/llmqueue/sim/queue.py",
        "        return F_TARGET\n    return F_PRED\n",
        "        return F_TARGET\n    if order == SPF:\n        return F_PROMPT\n    return F_PRED\n",
    ),
    (
        "tests/reference_engine.py",
        '    "predicted_remaining": lambda r: r.pred - r.g,\n',
        '    "predicted_remaining": lambda r: r.pred - r.g,\n    "prompt": lambda r: r.prompt,\n',
    ),
]

ROUTER: list[Edit] = [
    (
        "src/llmqueue/policy.py",
        '    Router("power_of_d", "requests"),\n',
        '    Router("power_of_d", "requests"),\n    Router("round_robin_reverse", "none"),\n',
    ),
    (
        "src/llmqueue/sim/router.py",
        "COMPILED_ROUTERS = (\n"
        "    ROUND_ROBIN, RANDOM, JSQ, LEAST_WORK, LEAST_KV, POWER_OF_D, PREFIX_AFFINITY, PREFIX_SCORE,\n"
        "    PREFIX_INDEX,\n)",
        'REVERSE = router_code("round_robin_reverse")\n'
        "COMPILED_ROUTERS = (\n    ROUND_ROBIN, RANDOM, JSQ, LEAST_WORK, LEAST_KV, POWER_OF_D, "
        "PREFIX_AFFINITY, PREFIX_SCORE,\n    PREFIX_INDEX, REVERSE,\n)",
    ),
    (
        "src/llmqueue/sim/router.py",
        "        return _least(load, perm, d, rst)\n    return -1\n",
        "        return _least(load, perm, d, rst)\n"
        "    if code == REVERSE:\n"
        "        r = np.int64(rst[R_NEXT])\n"
        "        rst[R_NEXT] = np.uint64((r + 1) % c)\n"
        "        return c - 1 - r\n"
        "    return -1\n",
    ),
    (
        "tests/reference_engine.py",
        '        "prefix_score", "prefix_index",\n    )  # fmt: skip\n',
        '        "prefix_score", "prefix_index", "round_robin_reverse",\n    )  # fmt: skip\n',
    ),
    (
        "tests/reference_engine.py",
        '        if self.name == "random":\n',
        '        if self.name == "round_robin_reverse":\n'
        "            r = self.next\n"
        "            self.next = (r + 1) % self.c\n"
        "            return self.c - 1 - r\n"
        '        if self.name == "random":\n',
    ),
]

TOY_READER = '''
TOY_COLUMNS = ("time_s", "input_tokens", "output_tokens")


def _read_toy(path: str | os.PathLike[str], columns: TraceColumns, where: str) -> TraceRows:
    """A toy CSV: time_s (s, in arrival order), input_tokens, output_tokens."""
    df = csv_frame(path, TOY_COLUMNS, where)
    f = str(path)
    enough_rows(len(df), f, where)
    t, prompt, output = _time_and_tokens(df, TOY_COLUMNS, f, where)
    _in_order(t, f, where, data_row, "time_s", "s")
    arrival = t - t[0]
    return TraceRows(
        arrival, np.mod(arrival, DAY_S), prompt, output, None, source=f"{where} {Path(path).name} (toy)"
    )


# ---- the registry'''

TOY_WRITER = """

def toy(rows: list[Row], drop: str | None = None) -> str:
    cols = ["time_s", "input_tokens", "output_tokens"]
    keep = [i for i, c in enumerate(cols) if c != drop]
    lines = [",".join(cols[i] for i in keep)]
    lines += [",".join([str(t), str(p), str(o)][i] for i in keep) for t, p, o in rows]
    return "\\n".join(lines) + "\\n"


WRITERS: dict"""

FORMAT: list[Edit] = [
    ("src/llmqueue/traces/formats.py", "\n# ---- the registry", TOY_READER),
    (
        "src/llmqueue/traces/formats.py",
        '        TraceFormat("vidur", _read_vidur, VIDUR_COLUMNS, header=VIDUR_COLUMNS),\n',
        '        TraceFormat("vidur", _read_vidur, VIDUR_COLUMNS, header=VIDUR_COLUMNS),\n'
        '        TraceFormat("toy", _read_toy, TOY_COLUMNS, header=TOY_COLUMNS),\n',
    ),
    ("tests/traces/test_formats.py", "\n\nWRITERS: dict", TOY_WRITER),
    (
        "tests/traces/test_formats.py",
        '    "vidur": (vidur, "splitwise_conv.csv"),\n',
        '    "vidur": (vidur, "splitwise_conv.csv"),\n    "toy": (toy, "toy.csv"),\n',
    ),
]

# recipe: (its edits, the bold words that open its paragraph in docs/architecture.md, the most
# files it may take)
RECIPES = {
    "order": (ORDER, "**A queue order**", 3),
    "router": (ROUTER, "**A router**", 3),
    "format": (FORMAT, "**A trace format**", 2),
}


def _paragraph(opening: str) -> str:
    """The text of docs/architecture.md from `opening` to the next recipe's bold opening."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index(opening)
    end = text.find("\n**A ", start + len(opening))
    return text[start : end if end > 0 else None]


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_each_recipe_takes_the_files_its_docs_name_and_no_more(recipe: str) -> None:
    edits, opening, most = RECIPES[recipe]
    files = {f for f, _, _ in edits}
    named = set(re.findall(r"`((?:src|tests)/[\w/.]+\.py)`", _paragraph(opening)))
    assert files <= named, f"{recipe}: files the docs do not name: {sorted(files - named)}"
    assert len(files) <= most, f"{recipe}: {len(files)} files, the target is at most {most}"
    for f, old, _ in edits:
        assert (ROOT / f).read_text().count(old) == 1, f"{recipe}: {f} no longer holds {old!r}"


def test_the_toy_order_router_and_format_pass_the_suites_checks(tmp_path: Path) -> None:
    tree = copy_worktree(tmp_path / "tree")
    for edits, _, _ in RECIPES.values():
        for f, old, new in edits:
            path = tree / f
            text = path.read_text()
            assert text.count(old) == 1, f"{f}: the recipe's anchor {old!r} is not there once"
            path.write_text(text.replace(old, new))
    tests = [
        "tests/core/test_policy.py",
        "tests/sim/test_engine_reference.py::test_every_order_matches_reference_on_one_table[spf]",
        "tests/sim/test_engine_reference.py"
        "::test_the_reference_refuses_an_order_former_or_router_it_has_no_rule_for",
        "tests/sim/test_engine_routers.py"
        "::test_every_router_matches_reference_on_one_table[round_robin_reverse]",
        "tests/traces/test_formats.py",
    ]
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
        + ["-o", "addopts=", "-n", "0", "-k", "not test_simulate_runs_on_a_recognised_trace"]
        + ["-rA", *tests],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    # the toys ran: the order and the router against the reference, the format through every
    # test written for each format
    passed = set(re.findall(r"^PASSED (\S+)", out, re.M))
    assert {tests[1], tests[3]} <= passed, out[-3000:]
    toy_format = [t for t in passed if re.search(r"test_formats.py::.*\[(.*-)?toy[\]-]", t)]
    assert len(toy_format) >= 5, out[-3000:]
