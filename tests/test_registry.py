"""The registry's entries: each built-in says what it is in one place, tasks declare the options they
take and the registry checks them, and unknown names get the names there are (and a near one)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

import pytest

from fathom import BackendEntry, BatchSized, RunSpec, Scorer
from fathom.backends.sim import SimulatedBackend
from fathom.errors import SpecError
from fathom.prompts.tokenizers import load_tokenizer
from fathom.registry import (
    BACKENDS,
    KNOBS,
    SCORING,
    TASK,
    TASKS,
    answering_spec,
    check_backend,
    check_spec,
    create_backend,
    create_task,
    tasks_taking,
)
from fathom.run.runner import default_run_dir


def spec(task: str = "niah", depths: tuple[float, ...] = (0.5,), **changes: Any) -> RunSpec:
    return RunSpec(task, "sim:perfect", "char", (1024,), depths, 1, **changes)


def test_every_entry_declares_only_options_a_spec_has() -> None:
    assert {"corpus", "needle", "perplexity", "answer_logprob", "scoring"} <= set(KNOBS)
    assert not {"task", "model", "lengths", "depths", "samples", "seed", "control"} & set(KNOBS)
    for name, entry in TASKS.items():
        assert set(entry.knobs) <= set(KNOBS), name
        assert entry.summary, name


def test_every_backends_extra_is_one_that_pyproject_offers() -> None:
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    extras = tomllib.loads(pyproject)["project"]["optional-dependencies"]
    for name, entry in BACKENDS.items():
        assert entry.summary, name
        assert not entry.extra or entry.extra in extras, name
        assert bool(entry.packages) == bool(entry.extra), name  # what the extra installs is looked for


def test_an_entry_that_says_it_scores_makes_scorers() -> None:
    assert BACKENDS["sim"].scores and isinstance(create_backend("sim:perfect", "char"), Scorer)
    from fathom.backends.openai import OpenAIBackend

    assert BACKENDS["openai"].scores and hasattr(OpenAIBackend, "score")


def test_a_backends_status_names_what_to_install() -> None:
    sim = BACKENDS["sim"].factory
    assert BackendEntry(sim, "s", packages=("numpy",), extra="x").status() == "ready"
    assert BackendEntry(sim, "s", packages=("fathom_absent",), extra="x").status().endswith("[x]'")
    assert BackendEntry(sim, "s", packages=("fathom_absent",)).status() == "needs fathom_absent"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"depths": ()}, r"^no depths given: pass a count \(--depths 11\)"),
        (
            {"task": "vt"},
            r"^'vt' draws needle depths per sample, as RULER does, .*; drop --depths \(it applies to niah\)$",
        ),
        ({"task": "perplexity"}, r"^'perplexity' places no needles; drop --depths \(it applies to niah\)$"),
        (
            {"task": "ruler", "depths": (), "needle": "uuid"},
            r"^--needle goes with niah runs, not 'ruler': drop --needle$",
        ),
        (
            {"task": "ruler", "depths": (), "perplexity": True},
            r"^--perplexity goes with niah runs, not 'ruler': drop --perplexity "
            r"\(for perplexity alone: fathom run perplexity\)$",
        ),
        (
            {"task": "perplexity", "depths": (), "scoring": "exact"},
            r"^--scoring goes with niah, ruler, niah_single_1 and \d+ more runs, not 'perplexity': "
            "drop --scoring$",
        ),
        (
            {"task": "niah", "truncate": False},
            r"^--no-truncate goes with longbench, longbench-e, longbench-v2 and \d+ more runs, not 'niah': "
            "drop --no-truncate$",
        ),
        (
            {"scoring": "exat"},
            r"^unknown scoring 'exat' \(did you mean 'exact'\?\): "
            "use one of contains, ordered, share, exact, all, any, mrcr$",
        ),
        (
            {"task": "nia"},
            r"^unknown task 'nia' \(did you mean 'niah'\?\): use one of niah, perplexity, ruler, ",
        ),
    ],
)
def test_an_option_a_task_does_not_take_is_refused_before_any_work(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        check_spec(spec(**changes))


def test_an_option_a_task_declares_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    check_spec(spec(needle="uuid", perplexity=True, corpus="noise"))
    check_spec(spec("qa_1", depths=(), corpus="noise", max_new_tokens=4))
    # Adding a knob to a task is one line in its entry.
    monkeypatch.setitem(
        TASKS, "perplexity", dataclasses.replace(TASKS["perplexity"], knobs=("corpus", "scoring"))
    )
    check_spec(spec("perplexity", depths=(), scoring="exact"))
    assert tasks_taking("scoring")[:2] == ["niah", "perplexity"] and tasks_taking("depths") == ["niah"]


def test_create_task_checks_the_options_too() -> None:
    with pytest.raises(SpecError, match="drop --needle"):
        create_task(spec("niah_single_2", depths=(), needle="uuid"), load_tokenizer("char"))


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            "gpt5",
            r"^unknown model 'gpt5': name it as backend:model, with backend one of llamacpp:\.\.\., hf:",
        ),
        ("llamacp:x.gguf", r"^unknown model 'llamacp:x\.gguf' \(did you mean 'llamacpp'\?\): name it as"),
    ],
)
def test_an_unknown_model_names_the_backends_there_are(model: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        create_backend(model, "auto")


class _Generator:
    """A backend that generates but cannot read log-probabilities."""

    name, input, exact_lengths = "gen:x", "ids", True
    trained_window = max_prompt_tokens = None
    tokenizer = load_tokenizer("char")


@pytest.mark.parametrize(
    "changes", [{"task": "perplexity", "depths": ()}, {"perplexity": True}, {"answer_logprob": True}]
)
def test_a_run_that_reads_log_probabilities_needs_a_backend_that_can(changes: dict[str, Any]) -> None:
    with pytest.raises(
        SpecError, match=r"'gen:x' cannot read .*: use one of llamacpp, hf, vllm, openai or sim$"
    ):
        check_backend(spec(**changes), _Generator())  # type: ignore[arg-type]
    check_backend(spec(), _Generator())  # type: ignore[arg-type]


def test_batch_size_is_a_declared_capability() -> None:
    class OneByOne(SimulatedBackend):
        requests_per_call = 1

    assert isinstance(OneByOne("perfect", load_tokenizer("char")), BatchSized)
    assert not isinstance(SimulatedBackend("perfect", load_tokenizer("char")), BatchSized)


def test_without_plugins_the_names_are_fathoms_own() -> None:
    assert TASK.names() == list(TASKS) and SCORING.names() == [
        "contains",
        "ordered",
        "share",
        "exact",
        "all",
        "any",
        "mrcr",
    ]
    assert [listed.origin for listed in TASK.listed()] == ["fathom"] * len(TASKS)


def test_the_identity_leaves_out_the_settings_of_how_requests_travel() -> None:
    def model(name: str) -> str:
        return answering_spec(RunSpec("niah", name, "cl100k_base", (1024,), (0.5,), 3)).model

    url = "openai:m@http://host:8000/v1"
    given = f"{url}?timeout=5&endpoint=chat&concurrency=2&api_key_env=MY_KEY&window=8k&retries=9&max_wait=60"
    assert model(given) == f"{url}?endpoint=chat&window=8k"  # what is kept, in its order and spelling
    assert model(f"{url}?timeout=5&concurrency=2") == model(url) == url
    for unchanged in ("sim:cliff?window=8k", "llamacpp:smollm2?threads=2", "nobackend:x?timeout=5"):
        assert model(unchanged) == unchanged


def test_a_run_folder_keeps_its_name_whatever_the_transport_settings(tmp_path: Path) -> None:
    def folder(name: str) -> Path:
        return default_run_dir(RunSpec("niah", name, "cl100k_base", (1024,), (0.5,), 3), tmp_path)

    url = "openai:m@http://host:8000/v1"
    assert folder(f"{url}?timeout=1") == folder(f"{url}?concurrency=64&timeout=600") == folder(url)
    assert folder(f"{url}?window=8k") != folder(url)  # the model's window changes what it is asked
