"""Driver of the vLLM validation measurements (runs in the vLLM environment, ``make validate-vllm``).

    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate check-env
    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate model   [--config FILE]
    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate measure [--config FILE] [--out DIR]
        [--requests N] [--warmup-requests W] [--capacity-requests C]
    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate matrix [--config FILE] [--groups A,B]
        [--engine vllm|transformers] [--redo] [--out DIR] [--requests N] [--warmup-requests W] [--capacity-requests C]
        [--calibration-batches K] [--repeat-sessions S]
    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate machine-speed [--config FILE]
        [--out DIR] [--cycles N]
    .venv/bin/python -m llmqueue validate predictions [--config FILE]

``measure`` makes the model if needed, starts vLLM once and runs, in this order: the warm-up
batches, the calibration batches, the capacity burst, then one Poisson run per load (rates =
load x measured capacity); then it writes the run folder
(``<validation.vllm.out>/vllm-cpu-<hardware-id>/``, :mod:`llmqueue.engines.single_run`).

``matrix`` measures the run groups of the validation matrix (config ``validation.vllm.matrix``,
:mod:`llmqueue.engines.groups`), each into its own folder
``<matrix.out>/matrix-<hardware-id>/<group>/``, written whole when the group is done: a group
whose folder is complete is skipped unless ``--redo``, so an interrupted matrix resumes group by
group (:mod:`llmqueue.engines.matrix_run`). With ``--engine transformers`` (run from
``.venv-transformers``) the groups are ``validation.transformers.matrix``'s, measured on
transformers' continuous batching into ``matrix-transformers-<hardware-id>/``. ``predictions`` (main environment: scikit-learn)
writes the learned predictor's prediction for every trace row that ``ssjf`` runs draw from
(:mod:`llmqueue.engines.predictions`).

``machine-speed`` (config ``validation.vllm.machine_speed``) repeats one decode batch and two
fixed kernels on one engine (:mod:`llmqueue.engines.speed_run`).

Every engine command checks, in this order and before it writes anything: its flags, the whole
config (schema, then meaning: :func:`llmqueue.studies.validation.checks.load_validation_config`), the
environment (vLLM importable, :func:`llmqueue.engines.environment.require_engine`). Bad input
exits with code 2 and one line naming the flag or key.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from llmqueue.cli import add_command


def _given(args: argparse.Namespace) -> dict[str, int | None]:
    """The smoke-run override flags this command has (None where not given), checked against
    their bounds (:func:`llmqueue.engines.matrix_run.checked_overrides`, one line naming the
    flag) before the config is read."""
    from llmqueue.engines.matrix_run import OVERRIDES, checked_overrides

    given = {key: getattr(args, key) for key in OVERRIDES if hasattr(args, key)}
    checked_overrides(given)
    return given


def _config(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    from llmqueue.studies.validation.checks import load_validation_config

    return load_validation_config(args.config)


def cmd_check_env(_: argparse.Namespace) -> None:
    """One line: the vLLM environment is usable, or what is wrong with it."""
    from llmqueue.engines.environment import check_env

    print(check_env())


def cmd_model(args: argparse.Namespace) -> None:
    from llmqueue.engines.environment import require_engine
    from llmqueue.engines.model import make_model
    from llmqueue.engines.record import log

    _, sec = _config(args)
    require_engine("model", packages=("torch", "transformers"))
    m = sec["model"]
    make_model(m["shape"], m["dtype"], m["seed"], m["dir"], log=log)


def cmd_measure(args: argparse.Namespace) -> None:
    from llmqueue.engines.environment import require_engine
    from llmqueue.engines.matrix_run import checked_overrides
    from llmqueue.engines.single_run import engine_settings, measure_single
    from llmqueue.studies.validation.checks import check_validation_section

    given = _given(args)
    cfg, sec = _config(args)
    over = checked_overrides(given)
    if "requests" in over:
        sec["requests"] = over["requests"]
    if "warmup_requests" in over:
        sec["warmup_requests"] = over["warmup_requests"]
    if "capacity_requests" in over:
        sec["capacity"]["requests"] = over["capacity_requests"]
    check_validation_section(sec)
    engine_settings(cfg, sec, args.engine)  # bad settings refused by key before any model is built
    require_engine("measure", engine=args.engine)
    measure_single(cfg, sec, over, args.out, engine=args.engine)


def cmd_matrix(args: argparse.Namespace) -> None:
    """Measure the groups of the validation matrix (module docstring)."""
    from llmqueue.engines.environment import require_engine
    from llmqueue.engines.matrix_run import measure_matrix

    given = _given(args)
    cfg, sec = _config(args)
    if not args.check:
        require_engine("matrix", engine=args.engine)
    measure_matrix(
        cfg, sec, args.groups, given, out=args.out, redo=args.redo, check=args.check,
        engine=args.engine,
    )  # fmt: skip


def cmd_predictions(args: argparse.Namespace) -> None:
    from llmqueue.engines.predictions import write_predictions

    cfg, sec = _config(args)
    write_predictions(cfg, sec, args.groups, needed_model=args.needed_model)


def cmd_machine_speed(args: argparse.Namespace) -> None:
    from llmqueue.engines.environment import require_engine
    from llmqueue.engines.speed_run import check_machine_speed, measure_machine_speed

    cfg, sec = _config(args)
    check_machine_speed(sec, cycles=args.cycles)  # the flag and the section, before the engine
    require_engine("machine-speed")
    measure_machine_speed(cfg, sec, cycles=args.cycles, out=args.out)


COMMANDS: dict[str, Callable[[argparse.Namespace], None]] = {
    "check-env": cmd_check_env,
    "model": cmd_model,
    "measure": cmd_measure,
    "matrix": cmd_matrix,
    "predictions": cmd_predictions,
    "machine-speed": cmd_machine_speed,
}


def _groups_arg(text: str) -> str:
    """--groups: comma-separated group names; an empty list is refused (leave the flag out to
    take every group)."""
    if not [n for n in text.split(",") if n.strip()]:
        raise argparse.ArgumentTypeError(
            "names no group (comma-separated group names; leave --groups out for all)"
        )
    return text


def register(subparsers: Any) -> None:
    parser = add_command(subparsers, "validate", __doc__)
    sub = parser.add_subparsers(dest="validate_command", required=True, parser_class=type(parser))
    sub.add_parser("check-env", help="is the vLLM environment usable (one line)")
    p_model = sub.add_parser("model", help="make the random-weight model")
    p_model.add_argument("--config", default="config/config.yaml")
    p_meas = sub.add_parser("measure", help="calibration, capacity and the Poisson loads")
    p_meas.add_argument("--config", default="config/config.yaml")
    from llmqueue.engines.environment import ENGINE_ENVS

    p_meas.add_argument("--engine", default="vllm", choices=list(ENGINE_ENVS),
                        help="the engine measured (default vllm; transformers: its continuous "
                        "batching, settings validation.transformers.engine)")  # fmt: skip
    p_meas.add_argument(
        "--out", default=None, help="run folder (default: <out>/<engine>-cpu-<hardware-id>)"
    )
    p_meas.add_argument("--requests", type=int, default=None, help="requests per load (trial runs)")
    p_meas.add_argument("--warmup-requests", type=int, default=None)
    p_meas.add_argument("--capacity-requests", type=int, default=None)
    p_mat = sub.add_parser("matrix", help="the run groups of the validation matrix")
    p_mat.add_argument("--config", default="config/config.yaml")
    p_mat.add_argument("--engine", default="vllm", choices=list(ENGINE_ENVS),
                       help="the engine measured (default vllm; transformers: the groups of "
                       "validation.transformers.matrix)")  # fmt: skip
    p_mat.add_argument("--groups", default=None, type=_groups_arg,
                       help="comma-separated group names (default: all)")  # fmt: skip
    p_mat.add_argument("--redo", action="store_true", help="measure complete groups again")
    p_mat.add_argument("--check", action="store_true", help="check the groups and exit")
    p_mat.add_argument("--out", default=None, help="folder of the group folders (default: "
                       "<matrix.out>/matrix-<hardware-id>, transformers: "
                       "matrix-transformers-<hardware-id>)")  # fmt: skip
    p_mat.add_argument("--requests", type=int, default=None, help="requests per run (smoke runs)")
    p_mat.add_argument("--warmup-requests", type=int, default=None)
    p_mat.add_argument("--capacity-requests", type=int, default=None)
    p_mat.add_argument("--calibration-batches", type=int, default=None,
                       help="only the first K calibration batches (smoke runs)")  # fmt: skip
    p_mat.add_argument("--repeat-sessions", type=int, default=None,
                       help="fresh-engine repeat sessions (0: none)")  # fmt: skip
    p_speed = sub.add_parser("machine-speed", help="decode batches and fixed kernels in turn: "
                             "does the engine's speed follow the machine's")  # fmt: skip
    p_speed.add_argument("--config", default="config/config.yaml")
    p_speed.add_argument("--out", default=None, help="folder (default: "
                         "<machine_speed.out>/machine-speed-<hardware-id>)")  # fmt: skip
    p_speed.add_argument("--cycles", type=int, default=None, help="cycles (short trial runs)")
    p_pred = sub.add_parser("predictions", help="the learned predictor's predictions (main env)")
    p_pred.add_argument("--config", default="config/config.yaml")
    p_pred.add_argument("--groups", default=None, type=_groups_arg,
                        help="comma-separated group names (default: all)")  # fmt: skip
    p_pred.add_argument("--needed-model", action="store_true",
                        help="print the predictor model file the groups need (nothing if none)")  # fmt: skip
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    COMMANDS[args.validate_command](args)
    return 0
