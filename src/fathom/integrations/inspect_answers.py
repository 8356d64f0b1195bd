"""inspect_ai's answers as fathom's: a model output read as a ``Completion`` (the answer apart from any
reasoning, as fathom's own backends keep it), and a stand-in backend that hands a run those answers
back, so that ``fathom import-inspect`` writes its records with the runner's own code.

inspect_ai's objects are read by their attributes (``output.completion``, ``output.usage``, ...), so
this module imports nothing of inspect_ai and loads without it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fathom.backends.base import InputKind, Request
from fathom.backends.reasoning import reasoned
from fathom.errors import FathomError
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Completion, ErrorKind

# inspect's stop reasons that mean the answer was cut at its budget: fathom's "length".
_CUT = frozenset({"max_tokens", "model_length"})


def completion_of(output: Any, tokenizer: Tokenizer, error: str | None = None) -> Completion:
    """An inspect ``ModelOutput`` as fathom's completion: its text the answer alone, the reasoning set
    apart (inspect's reasoning blocks, or a think block opening the text, as fathom's text backends
    split it; ``fathom.backends.reasoning.reasoned``), counted by inspect's usage where it gives it.
    ``error``: the inspect sample's error, which makes the record an error record."""
    usage = output.usage
    seconds = float(output.time or 0.0)
    if error is not None:
        reason = error.strip().splitlines()[0] if error.strip() else "the sample failed"
        prompt = usage.input_tokens if usage is not None else 0
        return Completion(
            "", prompt, 0, "error", seconds, error=ErrorKind.BACKEND_ERROR.error(f"inspect: {reason}")
        )
    stop = str(output.stop_reason)
    completion = Completion(
        text=output.completion,
        prompt_tokens=usage.input_tokens if usage is not None else 0,
        completion_tokens=usage.output_tokens if usage is not None else 0,
        finish_reason="length" if stop in _CUT else stop,
        latency_s=seconds,
    )
    counted = usage.reasoning_tokens if usage is not None else None
    return reasoned(completion, _reasoning(output), tokenizer, counted=counted)


def _reasoning(output: Any) -> str | None:
    """The reasoning blocks of the output's message, joined; None where it has none."""
    if not output.choices:
        return None
    content = output.message.content
    if isinstance(content, str):
        return None
    blocks = [part.reasoning for part in content if getattr(part, "type", None) == "reasoning"]
    return "\n\n".join(blocks) or None


@dataclass(frozen=True)
class LoggedAnswer:
    """One inspect sample's answer as its log holds it, with the sha256 of the prompt it answered."""

    completion: Completion
    prompt_sha256: str


class MismatchError(FathomError):
    """A logged sample whose prompt is not the one this fathom builds for its cell."""


class InspectAnswers:
    """A fathom backend that answers each request with the completion inspect's log holds for it: what
    ``fathom import-inspect`` runs a spec with. It reads the prompts as messages (inspect's samples
    are chat messages), and does not know the model's tokenizer, so its lengths are approximate."""

    input: InputKind = "chat"
    exact_lengths = False
    trained_window: int | None = None
    max_prompt_tokens: int | None = None

    def __init__(
        self, model: str, tokenizer: Tokenizer, answers: Mapping[str, LoggedAnswer], config: Mapping[str, Any]
    ) -> None:
        self.name = f"inspect:{model}"
        self._tokenizer, self._answers, self._config = tokenizer, answers, dict(config)

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def settings(self) -> dict[str, Any]:
        return {"answered_by": "inspect_ai", "generate_config": self._config}

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return [self._answer(request) for request in requests]

    def _answer(self, request: Request) -> Completion:
        logged = self._answers[request.sample_id]
        if hashlib.sha256(request.ids.tobytes()).hexdigest() != logged.prompt_sha256:
            raise MismatchError(
                f"the log's sample {request.sample_id} answered another prompt than this fathom builds for "
                "it (another fathom version, corpus or tokenizer file made the log): import it where it "
                "was made"
            )
        return logged.completion
