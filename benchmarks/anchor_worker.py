"""Times Kamradt's needlehaystack 0.1.0 context builder; run by bench_prompts.py in its own venv.

Reads a job as JSON on stdin ({"encoding", "context_lengths", "cells": [[length, depth_percent]]})
and prints {"setup_s", "cell_s": [seconds per cell], "haystack_tokens"} as JSON on stdout.

The package's ``__init__`` imports its OpenAI, Anthropic and LangChain providers, which are not
installed (``--no-deps``): the tester module is loaded from its file instead, beside the two small
abstract base classes it imports. Its constructor is called as usual, with a provider whose
encode and decode are those of its OpenAI provider, on a tiktoken encoding that loads offline
from ``TIKTOKEN_CACHE_DIR``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
import types
from pathlib import Path
from typing import Any

import tiktoken

# Kamradt's defaults (needlehaystack/run.py).
NEEDLE = "\nThe best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day.\n"
QUESTION = "What is the best thing to do in San Francisco?"


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _package(name: str, path: Path, **attributes: Any) -> None:
    """An empty package in place of one whose ``__init__`` would import missing dependencies."""
    package = types.ModuleType(name)
    package.__path__ = [str(path)]
    vars(package).update(attributes)
    sys.modules[name] = package


def load_tester_module() -> types.ModuleType:
    spec = importlib.util.find_spec("needlehaystack")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("needlehaystack is not installed in this environment")
    root = Path(next(iter(spec.submodule_search_locations)))
    _package("needlehaystack", root)
    model = _load("needlehaystack.providers.model", root / "providers" / "model.py")
    evaluator = _load("needlehaystack.evaluators.evaluator", root / "evaluators" / "evaluator.py")
    _package("needlehaystack.providers", root / "providers", ModelProvider=model.ModelProvider)
    _package("needlehaystack.evaluators", root / "evaluators", Evaluator=evaluator.Evaluator)
    return _load("needlehaystack.llm_needle_haystack_tester", root / "llm_needle_haystack_tester.py")


def offline_provider(base: type[Any], encoding: tiktoken.Encoding) -> Any:
    """Kamradt's OpenAI provider without its API client: the same encode and decode."""

    class OfflineProvider(base):  # type: ignore[misc]
        model_name = f"offline-{encoding.name}"

        def encode_text_to_tokens(self, text: str) -> list[int]:
            return encoding.encode(text)

        def decode_tokens(self, tokens: list[int], context_length: int | None = None) -> str:
            return encoding.decode(tokens[:context_length])

        async def evaluate_model(self, prompt: str) -> str:
            raise NotImplementedError("this benchmark builds contexts only")

        def generate_prompt(self, context: str, retrieval_question: str) -> str:
            raise NotImplementedError("this benchmark builds contexts only")

    return OfflineProvider()


async def time_cells(tester: Any, cells: list[tuple[int, float]]) -> list[float]:
    seconds = []
    for length, percent in cells:
        start = time.perf_counter()
        await tester.generate_context(length, percent)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    job = json.load(sys.stdin)
    start = time.perf_counter()
    module = load_tester_module()
    provider = offline_provider(module.ModelProvider, tiktoken.get_encoding(job["encoding"]))
    tester = module.LLMNeedleHaystackTester(
        model_to_test=provider,
        needle=NEEDLE,
        retrieval_question=QUESTION,
        context_lengths=job["context_lengths"],  # the whole sweep: read_context_files reads up to its max
        document_depth_percents=sorted({percent for _, percent in job["cells"]}),
        save_results=False,
        save_contexts=False,
        print_ongoing_status=False,
    )
    setup_s = time.perf_counter() - start
    cells = [(int(length), float(percent)) for length, percent in job["cells"]]
    cell_s = asyncio.run(time_cells(tester, cells))
    # Untimed: how much text every cell reads and encodes before trimming it to its length.
    haystack_tokens = tester.get_context_length_in_tokens(tester.read_context_files())
    json.dump({"setup_s": setup_s, "cell_s": cell_s, "haystack_tokens": haystack_tokens}, sys.stdout)


if __name__ == "__main__":
    main()
