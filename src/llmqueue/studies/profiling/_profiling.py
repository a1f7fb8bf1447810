"""Shared pieces of the Fig. 2 plots (profiling study): model names, markers and colour index."""

from __future__ import annotations

MODEL_ORDER = ["llama2-7b-chat", "chinese-alpaca-2-7b", "chatglm3-6b"]
MODEL_NAMES = {
    "llama2-7b-chat": "LLaMA-2-7B-chat",
    "chinese-alpaca-2-7b": "Chinese-Alpaca-2-7B",
    "chatglm3-6b": "ChatGLM3-6B",
}
MARKERS = {"llama2-7b-chat": "o", "chinese-alpaca-2-7b": "s", "chatglm3-6b": "^"}


def colour_index(model: str) -> int:
    """The style colour of a model (its place in :data:`MODEL_ORDER`; 3 for any other)."""
    return MODEL_ORDER.index(model) if model in MODEL_ORDER else 3
