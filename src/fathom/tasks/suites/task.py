"""A real suite as a fathom task: each task's first items, at each length of the run.

A suite's length is its maximum length, as the suites' scripts take one: the filled prompt is cut in
the middle to it (``truncation.py``), then the chat template wraps it, and the answer's budget comes on
top. An item's prompt has its own length below that, recorded as the prompt's actual tokens, and the
analysis bins the samples by it (``fathom.analysis.suites``). With ``truncate`` off, a prompt that
would be cut is refused before the run starts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fathom.errors import SpecError
from fathom.prompts import Prompt, PromptText, frame
from fathom.prompts.haystack.index import Ids
from fathom.prompts.templates import CONTEXT_MARKER, ChatTemplate, resolve_template
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample, SourceFacts
from fathom.tasks.suites.catalogue import INFINITE_SUITES, SUITES, SUITES_VERSION, SuiteTask
from fathom.tasks.suites.data import Item, TaskData, read_task
from fathom.tasks.suites.infinite_metrics import INFINITE_METRICS
from fathom.tasks.suites.metrics import LONGBENCH_METRICS, Grader
from fathom.tasks.suites.truncation import cut_middle


def select(suite: str, names: tuple[str, ...]) -> list[SuiteTask]:
    """The suite's tasks named (all of them for none), in the suite's order."""
    tasks = SUITES[suite]
    unknown = [name for name in names if name not in tasks]
    if unknown:
        raise SpecError(
            f"{suite} has no task '{unknown[0]}': use --suite-tasks with some of {', '.join(tasks)}"
        )
    return [task for name, task in tasks.items() if not names or name in names]


def grader(suite: str, task: SuiteTask, item: Item) -> Grader:
    """The suite's grading of ``task``, named in records as ``suite:metric``."""
    method = f"{suite}:{task.metric}"
    if suite in INFINITE_SUITES:
        return Grader(method, whole=INFINITE_METRICS[task.metric])
    if task.metric == "classification":
        return Grader(method, first_line=task.first_line, classes=item.classes)
    return Grader(method, metric=LONGBENCH_METRICS[task.metric], first_line=task.first_line)


class SuiteRun:
    """The Task of ``longbench``, ``longbench-e``, ``longbench-v2`` and ``infinitebench``."""

    def __init__(self, spec: RunSpec, tokenizer: Tokenizer) -> None:
        if spec.data is None:
            raise SpecError(f"{spec.task} reads the suite's official files from a folder: pass --data DIR")
        self.spec, self.name, self.tokenizer = spec, spec.task, tokenizer
        folder = Path(spec.data)
        if not folder.is_dir():
            raise SpecError(f"--data {folder} is no folder: name the folder holding the {spec.task} files")
        self.data: dict[str, TaskData] = {
            task.name: read_task(folder, spec.task, task, spec.samples)
            for task in select(spec.task, spec.suite_tasks)
        }
        self.template: ChatTemplate = resolve_template(spec.template, tokenizer)
        head, tail = frame(tokenizer, self.template, PromptText("", "", "", spec.system_prompt), "")
        bos = [] if tokenizer.bos_id is None else [tokenizer.bos_id]
        # LongBench sends its few-shot and code prompts without the chat template: a BOS alone.
        self.frames = {True: (head, tail), False: (_ids(bos), _ids([]))}
        if not spec.truncate:
            self._refuse_long()

    def cells(self) -> Iterator[Cell]:
        # Length-major, as RULER's: a backend sets up each length's budget once.
        return (
            Cell(name, length, None, index)
            for length in self.spec.lengths
            for name, data in self.data.items()
            for index in range(len(data.items))
        )

    def prepare(self, cell: Cell) -> Sample:
        data = self.data[cell.task]
        task, item = data.task, data.items[cell.sample]
        before, context, after = self._parts(task, item)
        kept = cut_middle(before, context, after, cell.length, self.spec.task)
        head, tail = self.frames[task.chat]
        ids = np.concatenate([head, kept.before, kept.context, kept.after, tail])
        prompt = Prompt(ids, len(ids), len(head) + len(kept.before), len(kept.context), ())
        grade = grader(self.spec.task, task, item)
        decode = self.tokenizer.decode
        text = PromptText(
            decode(kept.before.tolist()), decode(kept.after.tolist()), "", self.spec.system_prompt
        )
        original = len(head) + len(before) + len(context) + len(after) + len(tail)
        return Sample(
            cell,
            prompt,
            text,
            item.question,
            item.answers,
            task.name,
            # Where the references occur in the document, a simulated reader finds their sentences.
            tuple(a for a in item.answers if len(a) > 3 and a in item.context),
            grade.method,
            self.spec.max_new_tokens or task.max_new_tokens,
            grader=grade,
            source=SourceFacts(item.id, item.groups, original, len(ids) < original),
        )

    def identity(self) -> dict[str, Any]:
        tasks = {name: data.task for name, data in self.data.items()}
        texts = json.dumps({name: [t.template, t.max_new_tokens, t.metric] for name, t in tasks.items()})
        return {
            "task": self.name,
            "version": SUITES_VERSION,
            "files": {data.task.file: data.sha256 for data in self.data.values()},
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "prompt_text_sha256": hashlib.sha256(texts.encode()).hexdigest(),
        }

    def _parts(self, task: SuiteTask, item: Item) -> tuple[Ids, Ids, Ids]:
        """The filled template's text before the document, the document and the text after, encoded."""
        filled = task.template.format(context=CONTEXT_MARKER, **item.fields)
        before, _, after = filled.partition(CONTEXT_MARKER)
        encode = self.tokenizer.encode
        return _ids(encode(before)), _ids(encode(item.context)), _ids(encode(after))

    def _refuse_long(self) -> None:
        """With truncation off, refuse a run in which some prompt would be cut, saying how many."""
        limit = min(self.spec.lengths)
        for name, data in self.data.items():
            sizes = [sum(len(p) for p in self._parts(data.task, item)) for item in data.items]
            over = [size for size in sizes if size > limit]
            if over:
                raise SpecError(
                    f"{len(over)} of {len(sizes)} {name} prompts exceed {limit} tokens (the longest has "
                    f"{max(over)}) and --no-truncate forbids cutting them: raise --lengths, lower "
                    "--samples, or let the suite cut their middle"
                )


def _ids(values: list[int]) -> Ids:
    return np.asarray(values, dtype=np.int32)
