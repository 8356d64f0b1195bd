"""``fathom``'s arguments: every command's parser, with the help each option shows."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, cast

from fathom import registry
from fathom.cli.inspect_cmd import add_import_inspect_command
from fathom.cli.lm_eval_cmd import add_lm_eval_command
from fathom.cli.series import add_series_command
from fathom.export.arguments import add_export_commands
from fathom.index.command import add_index_command
from fathom.judge.arguments import add_judge_command, add_judge_options
from fathom.packages import install_help
from fathom.plan.arguments import add_plan_options
from fathom.spec import add_latent_arguments
from fathom.tasks.suites.arguments import add_run_options, add_suite_commands
from fathom.track.arguments import add_log_option
from fathom.version import __version__


class _Defaults(argparse.HelpFormatter):
    """Help that shows each option's default, where it has one worth showing: every command's
    (``_Parser`` makes it theirs), so none can forget it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        flag = action.nargs == 0  # --no-control and friends: their default is the absence of the flag
        optional = action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)
        unsaid = action.default not in (None, argparse.SUPPRESS) and not flag and "%(default)" not in text
        return f"{text} (default: %(default)s)" if unsaid and optional else text


class _Parser(argparse.ArgumentParser):
    """fathom's parsers: each command's and subcommand's (argparse makes a subparser of its parent's
    class) shows defaults with ``_Defaults`` unless it names another formatter."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("formatter_class", _Defaults)
        super().__init__(**options)


# The exit status gates retrieval alone: a checkpoint that answers its questions without the context
# is suspect (memorised or leaked), but failing a CI gate on it would read as a lost ability.
COMPARE_DESCRIPTION = (
    "Pair each sample of NEW with its twin in BASE (the same question) and gate on a drop where the "
    "evidence is: one-sided exact sign tests overall, per length, per task and per cell, adjusted together "
    "by step-down minP over paired sign flips, and the effective length's drop on a paired bootstrap "
    "(docs/gate.md). It prints the smallest drop each level could have flagged, and warns where a level "
    "cannot reach significance (cells at k = 3). The runs' no-context controls are tested per task, as a "
    "family of their own: a NEW that answers significantly more questions without their context is "
    "flagged with a warning (a sign of memorisation or of the questions leaking into its training data) "
    "and listed in compare.json under controls.flagged, but it does not change the exit status, which "
    "gates on retrieval alone. Exit status: 0 no regression; 1 the gate found a drop; 2 the runs cannot "
    "be compared."
)
# Where ``fathom run`` makes its run folders when neither --out nor --run-dir says.
DEFAULT_RUNS = Path("runs")


def parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fathom", description="How much of a long context can a model use?")
    parser.add_argument("--version", action="version", version=f"fathom {__version__}")
    # Each module that adds a command takes the subparsers of a plain ArgumentParser (the type is
    # invariant in the parser's class); a _Parser is one.
    commands = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", required=True),
    )

    _add_run(commands)
    _add_plan(commands)

    report = commands.add_parser(
        "report", help="re-derive summary.json, the plots and report.html from a run's records"
    )
    report.add_argument("run_dir", type=Path, help="the run folder")
    report.add_argument(
        "--threshold",
        type=float,
        default=0.85,
        help="niah's effective length: the longest length whose score (and its 95%% lower bound) reaches "
        "this share; RULER tasks keep RULER's own thresholds",
    )
    report.add_argument(
        "--baseline", type=Path, default=None, help="a run of the same spec to compare with, in report.html"
    )
    report.add_argument(
        "--open",
        action="store_true",
        help="open report.html in a browser once written (where none is found, its path is printed)",
    )

    trap = commands.add_parser(
        "trap", help="the perplexity trap: perplexity beside retrieval, from one run or a run pair"
    )
    trap.add_argument("runs", type=Path, nargs="+", help="one run with both kinds of record, or two runs")
    trap.add_argument("--out", type=Path, required=True, help="the PNG to write")

    commands.add_parser("models", help="list the small real models installed, and the simulated ones")

    compare = commands.add_parser(
        "compare",
        help="did NEW regress against BASE? paired exact tests overall, per length, task and cell; exit 1 "
        "on a drop",
        description=COMPARE_DESCRIPTION,
    )
    compare.add_argument("base", type=Path, help="the baseline's run folder")
    compare.add_argument(
        "new", type=Path, help="the new checkpoint's run folder: the same spec, another model"
    )
    compare.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="the gate's false-alarm rate (all its tests together), and apart the control tasks' (Holm)",
    )
    compare.add_argument(
        "--out", type=Path, default=None, help="for compare.json and compare.png (default: NEW/compare-BASE)"
    )

    repair = commands.add_parser(
        "repair", help="move the damaged lines of a run folder's samples.jsonl aside (as a resumed run does)"
    )
    repair.add_argument("run_dir", type=_folder, help="the run folder")
    repair.add_argument(
        "--set-aside-newer",
        action="store_true",
        help="move records of a newer fathom's schema aside too (they are refused otherwise)",
    )

    runs = commands.add_parser("runs", help="list the run folders under a folder, with status and results")
    runs.add_argument(
        "folder", type=Path, nargs="?", default=None, help="default: runs (with --index: every run it holds)"
    )
    runs.add_argument(
        "--index", type=Path, default=None, help="list from this index (fathom index), not from the folders"
    )

    gallery = commands.add_parser(
        "gallery", help="run the simulated archetypes on one grid and write gallery.html of their heatmaps"
    )
    gallery.add_argument(
        "--out", type=Path, default=Path("gallery"), help="the folder for gallery.html and its runs"
    )

    add_export_commands(commands)
    add_lm_eval_command(commands, add_prompt_options)
    add_suite_commands(commands)
    add_judge_command(commands)
    add_series_command(commands)
    add_import_inspect_command(commands)
    add_index_command(commands)
    for logged in ("run", "compare", "series"):
        add_log_option(commands.choices[logged])
    return parser


def _folder(text: str) -> Path:
    """A folder argument: an empty one would silently mean the current folder, and one whose name is
    not UTF-8 could not be written into the manifest and report.html, found only after the run."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name a folder, e.g. runs/my-run")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8, as Python passes them on (surrogates)
        raise argparse.ArgumentTypeError(f"{text!r} is not UTF-8: name the folder in UTF-8") from None
    return Path(text)


def _add_run(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="run a sweep (resumes when its run folder exists)")
    _add_sweep(run)
    add_judge_options(run)
    run.add_argument(
        "--out", type=_folder, default=None, help=f"where new run folders go (default: {DEFAULT_RUNS})"
    )
    run.add_argument("--run-dir", type=_folder, default=None, help="this exact run folder")
    run.add_argument(
        "--label",
        action="append",
        metavar="KEY=VALUE",
        help="label the run (repeatable), e.g. --label step=1200: kept in its manifest outside its identity, "
        "listed by fathom runs, ordered by fathom series --by step",
    )
    _add_order(run)
    run.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local (this process) or ray: one actor per model replica on a Ray cluster, the records "
        "written here as a local run writes them "
        f"({install_help('ray')}; docs/ray.md)",
    )
    run.add_argument(
        "--replicas", type=int, default=None, help="with --executor ray: model replicas, one Ray actor each"
    )
    run.add_argument(
        "--address",
        default=None,
        help="with --executor ray: the Ray cluster's HOST:PORT, auto or ray://...; by default RAY_ADDRESS, "
        "else a local Ray started for the run",
    )
    run.add_argument(
        "--keep-too-long",
        action="store_true",
        help="run a sweep whose longest prompts exceed the backend's context, recording those as too_long "
        "(by default such a sweep is refused, with the lengths that fit)",
    )
    run.add_argument(
        "--no-progress",
        action="store_true",
        help="write no progress to stderr (bars on a terminal, a line per tenth of the work in a log)",
    )


def _add_plan(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = commands.add_parser(
        "plan",
        help="what a sweep would cost on GPUs (tokens, FLOPs, KV cache, memory, time, price), from the "
        "model's architecture, before running it",
    )
    _add_sweep(plan, planning=True)
    _add_order(plan)
    add_plan_options(plan)


def _add_sweep(parser: argparse.ArgumentParser, planning: bool = False) -> None:
    """The options that say what a sweep is, which ``fathom run`` and ``fathom plan`` share. A plan
    needs no model (its --arch may come from --model's file) and lists what it knows without a task."""
    parser.add_argument("task", nargs="?" if planning else None, help=_tasks_help())
    parser.add_argument(
        "--model",
        required=not planning,
        help="backend:model, e.g. sim:cliff?window=8k, with backend one of "
        f"{', '.join(registry.BACKEND.names())} (fathom models says more)"
        + ("; a plan reads --arch from its file or folder" if planning else ""),
    )
    add_prompt_options(parser)
    parser.add_argument(
        "--thinking-budget",
        type=int,
        default=None,
        help="thinking models: tokens of reasoning allowed before each answer's budget (--max-new-tokens "
        "comes after it: a request asks for both); refused by a backend that cannot honour one "
        "(docs/thinking.md)",
    )
    parser.add_argument(
        "--keep-reasoning",
        action="store_true",
        help="keep each answer's reasoning text in its record (its tokens are kept always)",
    )
    parser.add_argument(
        "--perplexity",
        action="store_true",
        help=f"{_for('perplexity')}: also score perplexity documents of the haystack corpus at every length "
        "(k per length)",
    )
    parser.add_argument(
        "--answer-logprob",
        action="store_true",
        help=f"{_for('answer_logprob')}: also read the gold answer's teacher-forced log-probability after "
        "each prompt",
    )
    parser.add_argument(
        "--no-control",
        dest="control",
        action="store_false",
        help="skip the no-context control (by default every question is also asked without its context)",
    )
    add_run_options(parser)


def add_prompt_options(parser: argparse.ArgumentParser) -> None:
    """The options that decide a sweep's prompts and their grading (tokenizer, lengths, depths,
    samples, seed, needles, corpora, template, scoring, answer budget, fill, ops, items, repeats):
    ``fathom run``'s and ``fathom plan``'s, and ``fathom export-lm-eval``'s, which writes those
    prompts for another harness to ask."""
    parser.add_argument(
        "--tokenizer",
        default="auto",
        help="auto (the model's own), char, cl100k_base, o200k_base, hf:PATH, ...",
    )
    parser.add_argument("--lengths", default="1k,2k,4k,8k", help="context lengths, e.g. 1k,2k,4k (k = 1024)")
    parser.add_argument(
        "--depths",
        default=None,
        help=f"{_for('depths')}: a count of even depths or fractions (0,0.5,1); default: 11",
    )
    parser.add_argument("--samples", type=int, default=3, help="samples per cell, each with its own needle")
    parser.add_argument("--seed", type=int, default=0, help="decides the needles and every draw of the run")
    parser.add_argument(
        "--corpus",
        action="append",
        help="prose (niah's default), essays (RULER's), noise, repeat, code, legal, technical, german, "
        "dir:PATH[/GLOB], or mix:NAME=WEIGHT,...; niah sweeps several (--corpus code,prose) as an axis",
    )
    parser.add_argument(
        "--needle",
        default=None,
        help=f"{_for('needle')}: number (default), words, uuid, fact, sf, split, chain, latent-1, latent-2 "
        "(low-overlap, with their literal twins), latent-1-literal, latent-2-literal",
    )
    parser.add_argument(
        "--distractors",
        type=int,
        default=None,
        help=f"{_for('distractors')}: look-alike needles (default 0; 3 for latent needles)",
    )
    parser.add_argument("--needles", type=int, default=1, help=f"{_for('needles')}: facts asked for at once")
    parser.add_argument(
        "--split-distance",
        default="0.25",
        help=f"{_for('split_distance')}: share of the haystack between a split needle's parts, or random",
    )
    parser.add_argument(
        "--haystack-offset",
        default="start",
        help=f"{_for('haystack_offset')}: start (one haystack: a prefix cache reuses it) or random",
    )
    parser.add_argument(
        "--needle-style",
        default="native",
        help=f"{_for('needle_style')}: native (number, words and uuid needles in the haystack's "
        "own form: a constant in code, a field in technical, German in german) or prose (English everywhere)",
    )
    add_latent_arguments(parser, _for("literal_distractor"))
    parser.add_argument(
        "--template",
        default="auto",
        help="auto, tokenizer, none, base (RULER's), plain, chatml, llama3, or a file",
    )
    parser.add_argument(
        "--system-prompt",
        default=None,
        help="a system message for every prompt: the chat template's system turn (plain text first, where "
        "the template has none)",
    )
    parser.add_argument(
        "--scoring",
        default=None,
        help=f"{', '.join(registry.SCORING.names())}; by default the task's own (niah: contains; RULER "
        "tasks: their metric)",
    )
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="niah: 32 by default; RULER tasks: their own budget"
    )
    parser.add_argument(
        "--fill",
        default="exact",
        help=f"{_for('fill')}: exact (each prompt and its tokens to generate fill the length) or ruler "
        "(the haystack sized by RULER's own search, in whole steps of its units: prompts land below the "
        "length, as RULER's do; docs/ruler.md)",
    )
    parser.add_argument(
        "--ops",
        default=None,
        help=f"{_for('ops')}: counts of relevant list operations, swept as an axis (default 4,16,64; "
        "docs/state-tracking.md)",
    )
    parser.add_argument(
        "--items",
        default=None,
        help=f"{_for('items')}: counts of matching records the answer lists, swept as an axis (default "
        "8,32,128; docs/long-outputs.md)",
    )
    parser.add_argument(
        "--repeats",
        default=None,
        help=f"{_for('repeats')}: how many times the piece of writing asked for again was asked for, swept "
        "as an axis (default 2,4,8; docs/mrcr.md)",
    )


def _add_order(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--order",
        default="prefix",
        help="prefix (prompts sharing prefixes together) or shuffled (for comparison)",
    )


def _tasks_help() -> str:
    """fathom's tasks by summary (those that share one, together), then the plugins' by name."""
    by_summary: dict[str, list[str]] = {}
    for name, entry in registry.TASKS.items():
        by_summary.setdefault(entry.summary, []).append(name)
    text = "; ".join(f"{', '.join(names)} ({summary})" for summary, names in by_summary.items())
    plugins = [name for name in registry.TASK.names() if name not in registry.TASKS]
    return text + (f"; from plugins: {', '.join(plugins)}" if plugins else "")


def _for(option: str) -> str:
    """The tasks an option applies to, for its help."""
    return ", ".join(registry.tasks_taking(option))
