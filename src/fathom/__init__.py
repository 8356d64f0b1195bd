"""fathom: measure how much of a long context a language model can actually use.

The names a Python user needs, importable from here; ARCHITECTURE.md says where each stage lives and
where new code goes. A plugin package adds tasks, backends and scoring methods through entry points in
the groups ``fathom.tasks``, ``fathom.backends`` and ``fathom.scorers``, each loading a TaskEntry, a
BackendEntry or a ScoringEntry (``fathom.registry`` says more).
"""

from fathom.analysis.paired import Comparison
from fathom.backends.base import (
    Backend,
    BackendEntry,
    BackendFactory,
    BatchSized,
    Built,
    Request,
    Scorer,
    ScoreRequest,
    Streamer,
    TokenScores,
    Tuned,
)
from fathom.errors import FathomError, SpecError
from fathom.prompts import ChatPrompt, Prompt, PromptBuilder, PromptText
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import Cell, Completion, FirstToken, Needle, PerplexityRecord, SampleRecord, Score
from fathom.report.compare import compare_runs
from fathom.report.derive import derive, run_spec
from fathom.run.store import RunFolder
from fathom.run.writer import RunResult
from fathom.scoring import ScoringEntry
from fathom.spec import RunSpec
from fathom.tasks.base import Document, Sample, Task, TaskEntry, TaskFactory
from fathom.version import __version__

__all__ = [  # noqa: RUF022 - grouped by what a user does with them, not sorted
    "__version__",
    # Run a spec: its records, then summary.json, the plots and report.html (what `fathom run` does).
    "RunResult",
    "RunSpec",
    "run_spec",
    # Read a run folder (RunFolder(path).read_manifest(), .latest()), re-derive its files, compare two.
    "Comparison",
    "PerplexityRecord",
    "RunFolder",
    "SampleRecord",
    "compare_runs",
    "derive",
    # Write a task: cells, and for each a Sample (a prompt built to its exact length) or a Document.
    "Cell",
    "Document",
    "Needle",
    "Prompt",
    "PromptBuilder",
    "PromptText",
    "Sample",
    "Task",
    "TaskEntry",
    "TaskFactory",
    "Tokenizer",
    "load_tokenizer",
    # Write a backend: requests in, completions out; scoring, streaming, a build, transport options
    # and a batch size are optional.
    "Backend",
    "BackendEntry",
    "BackendFactory",
    "BatchSized",
    "Built",
    "ChatPrompt",
    "Completion",
    "FirstToken",
    "Request",
    "ScoreRequest",
    "Scorer",
    "Streamer",
    "TokenScores",
    "Tuned",
    # Write a scoring method (--scoring): an output and its references in, a Score out.
    "Score",
    "ScoringEntry",
    # Errors: a FathomError's message names the problem and the fix; the CLI prints it as one line.
    "FathomError",
    "SpecError",
]
