"""The batching config sections: schema (typos fail) and semantic checks (clear InputErrors)."""

import copy
from pathlib import Path

import pytest
import yaml

from llmqueue.analytic.batch_time import rate_grid
from llmqueue.errors import InputError
from llmqueue.profiles import resolve_batch_profile
from llmqueue.schema import fill_defaults
from llmqueue.studies.batching import checks as batching
from llmqueue.tokens import parse_law

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def config():
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    fill_defaults(cfg, ROOT / "workflow/schemas/config.schema.yaml")
    return cfg


def test_shipped_config_passes(config):
    batching.check(config, ROOT)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c["batching"].__setitem__("simulaton", {}),
        lambda c: c["batching"]["fig6"].__setitem__("fixed_k", [8]),
        lambda c: c["batching"]["simulation"].__setitem__("requests", 10),
        lambda c: c["batch_profiles"]["paper_k8"].__setitem__("k3", -1e-4),
        lambda c: c["batch_profiles"]["paper_k8"].__setitem__("k5", 1.0),
        lambda c: c["batching"]["fig6"].__setitem__("bmax", [0]),
        lambda c: c["batching"]["fig6"].__setitem__("fixed_K", [0]),
        lambda c: c["batch_profiles"].__setitem__(
            "x", {"kind": "fit", "source": "roofline-a100-80gb"}
        ),
    ],
)
def test_schema_rejects(config, mutate):
    cfg = copy.deepcopy(config)
    mutate(cfg)
    with pytest.raises(InputError):
        fill_defaults(cfg, ROOT / "workflow/schemas/config.schema.yaml")


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (
            lambda c: c["batching"]["fig6"].__setitem__("profiles", ["nope"]),
            "batching.fig6.profiles",
        ),
        (
            lambda c: c["batching"]["fig5"]["panels"].__setitem__("llama", "nope"),
            "batching.fig5.panels.llama",
        ),
        (
            lambda c: c["batching"]["fig6"].__setitem__("tokens", "lognormal:mu=7"),
            "batching.fig6.tokens",
        ),
        (
            lambda c: c["batching"]["fig3"]["fig3b_tokens"].__setitem__(0, "gamma:k=2"),
            "fig3b_tokens[0]",
        ),
        (
            lambda c: c["batching"]["fig5"].__setitem__("bound_fit_range", [10, 2]),
            "bound_fit_range",
        ),
        (
            lambda c: c["batching"]["fig6"]["rates"].__setitem__("start", 0.99),
            "batching.fig6.rates",
        ),
        (lambda c: c["batch_profiles"]["paper_k8"].update(k3=0.0, k4=0.0), "k3 and k4"),
    ],
)
def test_semantic_checks_name_the_key(config, mutate, needle):
    cfg = copy.deepcopy(config)
    mutate(cfg)
    with pytest.raises(InputError, match=None) as err:
        batching.check(cfg, ROOT)
    assert needle in str(err.value)


def test_profile_resolution_from_fit_json():
    fit = {
        "batch": {"k1": 0.002, "k2": 0.0003, "k3": 8e-6, "k4": 0.006},
        "label": "roofline-predicted A100-80GB",
        "verdict": "predicted",
    }
    p = resolve_batch_profile("x", {"kind": "fit", "source": "s", "model": "m"}, fit)
    assert (p.k1, p.k4, p.verdict, p.source) == (
        0.002,
        0.006,
        "predicted",
        "roofline-predicted A100-80GB",
    )
    with pytest.raises(InputError, match="fit.json"):
        resolve_batch_profile("x", {"kind": "fit", "source": "s", "model": "m"}, None)
    with pytest.raises(InputError, match="k3"):
        resolve_batch_profile(
            "x", {"kind": "fit"}, {"batch": {"k1": 0, "k2": 0, "k3": -1, "k4": 0.1}}
        )


def test_rate_grid_follows_the_profile(config):
    prof = resolve_batch_profile("paper_k8", config["batch_profiles"]["paper_k8"])
    rates, mu, b = rate_grid(prof, parse_law("lognormal:mu=7,sigma=0.7"), 64, 0.1, 0.95, 0.085)
    assert 1 < b < 64 and rates.max() <= 0.95 * mu + 1e-12
    with pytest.raises(InputError):
        rate_grid(prof, parse_law("lognormal:mu=7,sigma=0.7"), 64, 0.5, 1.5, 0.1)
