"""``fathom export-lm-eval``: a run's samples as a task folder that lm-evaluation-harness runs.

The folder holds, for each of the run's tasks (RULER's and babi's several) at each length, one lm-eval
task: a JSONL of its samples and a YAML naming it ``fathom_TASK_LENGTH``; a group YAML
``fathom_SPECTASK`` holds them all, so that ``lm_eval --include_path DIR --tasks fathom_niah`` prints
the score per length, and the whole. One task per length because lm-eval aggregates per task: a task
of every length would print one number where fathom's question is how it falls with length.

The samples are those ``fathom run`` builds for the same spec and tokenizer (the same task, generators
and seed), each prompt rendered whole, chat template included, and written as the text a text backend
is sent: its ids decoded, its length checked by encoding that text again, as the run checks a text
backend's (``fathom.run.runner``). So lm-eval must not template it again: run without
``--apply_chat_template`` (docs/lm-eval.md says why). Each line keeps the sample's fathom facts (cell,
id, target and actual tokens, needles, the grader and its references); the folder's ``utils.py`` grades
with ``fathom.integrations.lm_eval_metrics`` inside lm-eval's process.

Nothing is written until the spec, the tokenizer and a prompt of each task at the shortest length
have been made (a bad name, or a length too short to hold a prompt, leaves no folder). An existing
``--out`` is written into only when empty or holding an earlier export of the same spec: lm-eval reads
every YAML under an include path, so another spec's tasks left beside these would run too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom import registry
from fathom.errors import FathomError, SpecError
from fathom.integrations.lm_eval_metrics import METRICS, grading_facts
from fathom.prompts import length_tolerance
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import Cell
from fathom.safe_files import OversizedFileError, read_bounded, replacing, write_file
from fathom.spec import RunSpec
from fathom.tasks.base import Sample, Task
from fathom.version import __version__

# Bump when what a folder holds, or how its docs are written, changes.
EXPORT_VERSION = 1
# The file that marks a folder as an export, and says of which spec.
MARKER = "fathom-lm-eval.json"
MARKER_MOST = 1 << 20  # bytes read of a marker, at most: fathom writes a few hundred
UTILS = "utils.py"
_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")

# The folder's lm-eval hooks: fathom's own, imported inside lm-eval's process (no grading copied here).
_UTILS_TEXT = '''"""Written by fathom export-lm-eval: lm-eval's hooks for this folder's tasks. The docs are
read and graded by fathom (fathom.integrations.lm_eval_metrics), imported here inside lm-eval's process."""

from pathlib import Path

try:
    from fathom.integrations import lm_eval_metrics
except ImportError as error:
    raise ImportError(
        "these fathom tasks are graded by fathom, which this Python cannot import: install fathom-eval "
        "(fathom's distribution; not the package named fathom) where lm_eval runs"
    ) from error

_HERE = Path(__file__).resolve().parent


def load_docs(**options):
    return lm_eval_metrics.load_docs(_HERE, **options)


process_results = lm_eval_metrics.process_results
'''


class LmEvalExportError(FathomError):
    """A folder that cannot be written, or a sample that cannot go into one."""


@dataclass(frozen=True)
class LmEvalTask:
    """One lm-eval task of an export: its name, the fathom task and length it holds, its docs."""

    name: str
    task: str
    length: int
    docs: int


@dataclass(frozen=True)
class LmEvalExport:
    """What an export wrote: the folder, the group naming every task, and the tasks."""

    folder: Path
    group: str
    tasks: tuple[LmEvalTask, ...]


DEFAULT_NAME = "fathom"  # what every task's and the group's name opens with, unless --name says otherwise


def lm_eval_name(text: str) -> str:
    """A name lm-eval takes (letters, digits, underscores): ``niah:code`` is ``niah_code``."""
    return _UNSAFE.sub("_", text).strip("_")


def check_exportable(spec: RunSpec) -> None:
    """Refuse, before any work, what a run refuses, and the tasks with no answer for lm-eval to grade
    as fathom does: perplexity's documents, and the real suites (lm-eval runs them from their own data)."""
    registry.check_spec(spec)
    entry = registry.TASK.entry(spec.task)
    if entry.needs_scores:
        raise SpecError(f"'{spec.task}' scores documents and generates nothing: no lm-eval task to write")
    if "data" in entry.knobs:
        raise SpecError(
            f"'{spec.task}' reads a real suite's official files: run it in lm-eval from its own tasks "
            "(lm_eval --tasks longbench, ...); export-lm-eval writes fathom's generated tasks"
        )


def export_lm_eval(spec: RunSpec, out: Path, name: str = DEFAULT_NAME) -> LmEvalExport:
    """Write ``spec``'s samples as an lm-eval task folder at ``out`` (as the module says), its tasks and
    group named with ``name`` (``fathom_niah``, or ``qwen3_niah`` for ``qwen3``): two exports that one
    ``lm_eval --include_path`` reads need names of their own, as lm-eval keeps one task of a name."""
    check_exportable(spec)
    if not name or lm_eval_name(name) != name or not name[0].isalpha():
        raise LmEvalExportError(
            f"--name '{name}' is no lm-eval task name: give letters, digits and underscores, opening with a "
            "letter (e.g. fathom_tokenizer_b)"
        )
    tokenizer = load_tokenizer(spec.tokenizer)
    task = registry.create_task(spec, tokenizer)
    groups = _grouped(task.cells())
    _check_shortest(task, groups, spec, tokenizer)
    group = lm_eval_name(f"{name}_{spec.task}")
    names = {key: lm_eval_name(f"{name}_{key[0]}_{key[1]}") for key in groups}
    if len(set(names.values())) < len(names):
        raise LmEvalExportError(f"two of the run's tasks share an lm-eval name: {sorted(names.values())}")
    # The group in the marker: the same spec under another name is another export, whose files would
    # lie beside this one's.
    marker = {"export": "lm-eval", "version": EXPORT_VERSION, "spec": spec.to_json(), "group": group}
    _check_out(out, marker)
    out.mkdir(parents=True, exist_ok=True)
    # The marker first: a folder left half written by a failure is then taken back by the same command.
    write_file(out / MARKER, json.dumps({**marker, "fathom": __version__}, indent=2) + "\n")
    write_file(out / UTILS, _UTILS_TEXT)
    written = []
    for (name, length), cells in groups.items():
        lm_task = names[name, length]
        budget = _write_docs(out / f"{lm_task}.jsonl", task, cells, spec, tokenizer)
        write_file(out / f"{lm_task}.yaml", _task_yaml(lm_task, spec, name, length, budget))
        written.append(LmEvalTask(lm_task, name, length, len(cells)))
    write_file(out / f"{group}.yaml", _group_yaml(group, [t.name for t in written]))
    return LmEvalExport(out, group, tuple(written))


def _grouped(cells: Iterable[Cell]) -> dict[tuple[str, int], list[Cell]]:
    """The run's cells by (task, length), in the run's order."""
    groups: dict[tuple[str, int], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.task, cell.length), []).append(cell)
    return groups


def _check_shortest(
    task: Task, groups: dict[tuple[str, int], list[Cell]], spec: RunSpec, tokenizer: Tokenizer
) -> None:
    """One doc of each task at the shortest length, made before anything is written: a length below a
    prompt's own overhead is refused here, as ``fathom run`` refuses it before its run, and so is a
    tokenizer whose decoded text does not encode back to its length."""
    for (_, length), cells in groups.items():
        if length == min(spec.lengths):
            _doc(_sample(task, cells[0]), spec, tokenizer)


def _check_out(out: Path, marker: dict[str, Any]) -> None:
    """Refuse an ``out`` that is no folder, or holds anything but an export of this spec."""
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_dir():
        raise LmEvalExportError(f"'{out}' is no folder: --out names the folder to write the tasks in")
    if not any(out.iterdir()):
        return
    held = _marker_in(out)
    if held is None:
        what = "other files than an export"
    elif {key: held.get(key) for key in marker} != json.loads(json.dumps(marker)):  # as JSON reads back
        what = "an export of another spec"
    else:
        return
    raise LmEvalExportError(
        f"'{out}' holds {what}, and lm_eval --include_path reads every YAML under it: choose a new or "
        "empty --out (or remove what is there)"
    )


def _marker_in(folder: Path) -> dict[str, Any] | None:
    """The folder's marker as written (a regular file holding a JSON object), or None."""
    path = folder / MARKER
    if path.is_symlink() or not path.is_file():
        return None
    try:
        held = json.loads(read_bounded(path, MARKER_MOST, "a marker").decode("utf-8"))
    except (ValueError, UnicodeDecodeError, OversizedFileError):
        return None
    return held if isinstance(held, dict) else None


def _sample(task: Task, cell: Cell) -> Sample:
    sample = task.prepare(cell)
    if not isinstance(sample, Sample):
        raise LmEvalExportError(f"cell {cell.id} is a document to score, not a sample to answer")
    return sample


def _write_docs(path: Path, task: Task, cells: list[Cell], spec: RunSpec, tokenizer: Tokenizer) -> int:
    """The cells' docs as JSONL (whole or not at all); the largest answer budget among them."""
    budget = 0
    with replacing(path) as stream:
        for cell in cells:
            sample = _sample(task, cell)
            budget = max(budget, sample.max_new_tokens)
            stream.write((json.dumps(_doc(sample, spec, tokenizer), ensure_ascii=False) + "\n").encode())
    return budget


def _doc(sample: Sample, spec: RunSpec, tokenizer: Tokenizer) -> dict[str, Any]:
    """A sample as lm-eval's doc: the prompt as the text a text backend is sent, checked to encode to
    the length it was built at, and fathom's facts of it."""
    prompt, cell = sample.prompt, sample.cell
    text = tokenizer.decode(prompt.ids.tolist())
    actual = len(tokenizer.encode_with_specials(text))
    built = prompt.target_tokens if prompt.fills_target else len(prompt.ids)
    if abs(actual - built) > length_tolerance(prompt.target_tokens):
        raise LmEvalExportError(
            f"sample {cell.id}: its text encodes to {actual} tokens of {tokenizer.name}, built at {built}: "
            "a prompt lm-eval's model would read at another length than its cell's"
        )
    placements = sample.needles.placements if sample.needles else ()
    facts = {
        "id": cell.id,
        "task": cell.task,
        "length": cell.length,
        "depth": cell.depth,
        "sample": cell.sample,
        "seed": spec.seed,
        "tokenizer": tokenizer.name,
        "target_tokens": prompt.target_tokens,
        "actual_tokens": actual,
        "needle": sample.kind,
        "needle_depths": [round(n.depth, 4) for n in prompt.needles],
        "needle_roles": [p.role for p in placements],
        "question": sample.question,
        "max_new_tokens": sample.max_new_tokens,
        **grading_facts(sample),
    }
    return {"prompt": text, "target": "\n".join(sample.answers), "fathom": facts}


def _task_yaml(name: str, spec: RunSpec, task: str, length: int, budget: int) -> str:
    # JSON's strings are YAML's double-quoted scalars: names and file names written with json.dumps.
    metrics = "".join(
        f"  - metric: {metric}\n    aggregation: mean\n    higher_is_better: {str(higher).lower()}\n"
        for metric, higher in METRICS.items()
    )
    return (
        f"# fathom export-lm-eval: {task} at {length} tokens of {spec.tokenizer}, seed {spec.seed}.\n"
        "# Each prompt is final, chat template included: run lm_eval without --apply_chat_template.\n"
        f"task: {json.dumps(name)}\n"
        "custom_dataset: !function utils.load_docs\n"
        f"dataset_kwargs:\n  docs: {json.dumps(name + '.jsonl')}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        "doc_to_text: prompt\n"
        "doc_to_target: target\n"
        "num_fewshot: 0\n"
        # No stop string but the model's end of text, as fathom's backends stop: listing's one id a
        # line and mrcr's paragraphs would be cut at lm-eval's default, a blank line.
        f"generation_kwargs:\n  until: []\n  max_gen_toks: {budget}\n  do_sample: false\n  temperature: 0.0\n"
        "process_results: !function utils.process_results\n"
        f"metric_list:\n{metrics}"
        f"metadata:\n  version: {EXPORT_VERSION}\n"
    )


def _group_yaml(group: str, tasks: list[str]) -> str:
    listed = "".join(f"  - {json.dumps(name)}\n" for name in tasks)
    metrics = "".join(
        f"  - metric: {metric}\n    aggregation: mean\n    weight_by_size: true\n" for metric in METRICS
    )
    return (
        f"group: {json.dumps(group)}\n"
        f"task:\n{listed}"
        f"aggregate_metric_list:\n{metrics}"
        f"metadata:\n  version: {EXPORT_VERSION}\n"
    )
