"""The odd-name shortcut (issue 29, item 1): real-looking names, latent distractors by default, and
``sim:odd-name``, the knowledge-free reader that answers the one name the haystack holds once."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fathom.analysis.stats import wilson_interval
from fathom.prompts.haystack import load_corpus
from fathom.prompts.hygiene import haystack_check
from fathom.prompts.names import FAMILY_NAMES, GIVEN_NAMES, NamePool, NamePoolError, check_pool, pool_of
from fathom.prompts.odd_names import odd_name_answer, odd_names
from fathom.prompts.spaces import EVAL, TRAIN
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import GOLD_ROLE, SampleRecord
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import LATENT_DISTRACTORS, RunSpec, default_distractors
from fathom.tasks.niah import NiahTask

CL100K = load_tokenizer("cl100k_base")


def scores(tmp_path: Path, distractors: int) -> tuple[int, int]:
    """sim:odd-name's right answers and samples on latent-1 and its literal twins, 1k and 2k."""
    spec = RunSpec(
        "niah", "sim:odd-name", "cl100k_base", (1024, 2048), (0.1, 0.3, 0.5, 0.7, 0.9), 12,
        needle="latent-1", distractors=distractors, control=False,
    )  # fmt: skip
    run(spec, tmp_path / f"d{distractors}", show_progress=False)
    records = [r for r in RunFolder(tmp_path / f"d{distractors}").records() if isinstance(r, SampleRecord)]
    return sum(r.score == 1.0 for r in records), len(records)


def test_the_odd_name_reader_is_right_alone_and_at_chance_among_characters(tmp_path: Path) -> None:
    hits, total = scores(tmp_path, 0)  # the old default: the gold's character is the only one
    assert total == 240 and hits / total >= 0.95
    hits, total = scores(tmp_path, LATENT_DISTRACTORS)  # the default: four characters
    low, high = wilson_interval(hits, total)
    assert low <= 1 / (LATENT_DISTRACTORS + 1) <= high, (hits, total)
    assert high < 0.45


def test_odd_names_are_sentence_opening_pairs_named_once() -> None:
    context = (
        "Mrs Clay came in. Nora Keller climbed the Story Bridge. Mrs Clay left. "
        "Sydney Opera House was closed. Bruno Sato laughed at Chapel Bridge."
    )
    assert odd_names(context) == ["Nora Keller", "Bruno Sato"]
    # One of them by a hash of the salt and the context: here the first, and the salt alone can turn
    # the draw to the other (salts 0-5 draw Nora Keller but at 4).
    assert odd_name_answer(context) == "Nora Keller"
    assert [odd_name_answer(context, str(salt)) for salt in range(6)] == ["Nora Keller"] * 4 + [
        "Bruno Sato",
        "Nora Keller",
    ]
    assert odd_name_answer("no names here.") is None


def test_the_pools_are_disjoint_and_real_names_only() -> None:
    assert not set(EVAL.names.given) & set(TRAIN.names.given)
    assert not set(EVAL.names.family) & set(TRAIN.names.family)
    assert set(EVAL.names.given) | set(TRAIN.names.given) == set(GIVEN_NAMES)
    assert set(EVAL.names.family) | set(TRAIN.names.family) == set(FAMILY_NAMES)
    assert pool_of("eval") == EVAL.names


def test_a_sample_names_no_name_its_corpus_holds_and_no_part_twice() -> None:
    task = NiahTask(RunSpec("niah", "sim:odd-name", "cl100k_base", (2048,), (0.5,), 6, needle="latent-2",
                            distractors=3), CL100K)  # fmt: skip
    check = haystack_check(load_corpus("prose").whole_text)
    assert not check.mentions([*task.space.names.given, *task.space.names.family])
    assert len(task.space.names.given) < len(EVAL.names.given)  # the prose corpus holds some
    for cell in task.cells():
        made = task.prepare(cell)
        assert made.needles is not None
        characters = [p.value for p in made.needles.placements]
        assert len(characters) == 4 and made.needles.placements[0].role == GOLD_ROLE
        parts = [part for name in characters for part in name.split(" ")]
        assert len(parts) == len(set(parts)) == 8


def test_latent_needles_take_three_distractors_unless_told() -> None:
    assert default_distractors("latent-1") == default_distractors("latent-2-literal") == 3
    assert default_distractors("number") == default_distractors(None) == 0


def test_a_pool_smaller_than_a_sample_is_refused() -> None:
    small = NamePool(("Nora", "Bruno"), ("Keller", "Sato", "Vogel"))
    check_pool(small, 1, 1, "eval")
    with pytest.raises(
        NamePoolError, match=r"--distractors 2: .* 3 characters.*use --distractors 1 or fewer"
    ):
        check_pool(small, 1, 2, "eval")
    draws = {small.draw(random.Random(seed), {"Nora"}) for seed in range(20)}
    assert {name.split(" ")[0] for name in draws} == {"Bruno"}


def test_the_cli_refuses_a_pool_too_small_with_one_line_and_no_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # The installed command beside this interpreter (a venv that is not activated has it there).
    fathom = shutil.which("fathom", path=str(Path(sys.executable).parent)) or shutil.which("fathom")
    assert fathom is not None, "the fathom command is not installed"
    command = [fathom, "run", "niah", "--model", "sim:odd-name", "--tokenizer",
               "char", "--lengths", "64k", "--depths", "0.5", "--samples", "1", "--needle", "latent-1",
               "--distractors", "500", "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("fathom: error: --distractors 500: a low-overlap sample names 501")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()
