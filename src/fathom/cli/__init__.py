"""The ``fathom`` command: parse, call the library, print. Errors are one line and exit 2."""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fathom import registry
from fathom.backends.local_models import LOCAL_MODELS, model_state
from fathom.backends.sim import ARCHETYPES
from fathom.cli.arguments import DEFAULT_RUNS, parser
from fathom.cli.browser import open_page
from fathom.cli.inspect_cmd import import_inspect_command
from fathom.cli.lm_eval_cmd import lm_eval_command
from fathom.cli.qualify import qualify_command
from fathom.cli.series import series_command
from fathom.cli.specs import sweep_spec
from fathom.errors import FathomError, SpecError
from fathom.export import check_export, check_text, write_examples
from fathom.export.arguments import export_spec
from fathom.index import indexed_entries
from fathom.index.command import index_command
from fathom.judge.arguments import judges_named
from fathom.judge.runner import check_judges, judge_run
from fathom.plan import plan_sweep, write_plan
from fathom.plan.arguments import plan_architecture, plan_setup
from fathom.plan.text import list_text, plan_text
from fathom.report.compare import compare_runs, write_comparison
from fathom.report.compare_text import comparison_text
from fathom.report.derive import report, run_spec, trap
from fathom.report.detect import check_detect, detect_text
from fathom.report.files import COMPARISON_HTML, REPORT, read_summary
from fathom.report.gallery import gallery
from fathom.report.runs import list_runs
from fathom.report.runs_text import runs_text
from fathom.report.text import summary_text
from fathom.run.labels import parse_labels
from fathom.run.runner import default_run_dir
from fathom.run.store import QUARANTINE, RunFolder
from fathom.spec import RunSpec
from fathom.tasks.suites.arguments import spec_options
from fathom.tasks.suites.demo import make_demo
from fathom.track.logged import log_comparison, log_run
from fathom.track.trackers import open_trackers

# Exit statuses (docs/run-folder.md): 0 done; 1 fathom compare found a regression; 2 bad input or
# an unusable folder, nothing run; 3 the run finished but some samples ended in errors; 130 interrupted.
SAMPLE_ERRORS = 3


def _spec(args: argparse.Namespace) -> RunSpec:
    """The sweep that ``fathom run`` and ``fathom plan`` options describe."""
    return sweep_spec(
        args,
        model=args.model or "",  # a plan may name no model
        thinking_budget=args.thinking_budget,
        keep_reasoning=args.keep_reasoning,
        perplexity=args.perplexity,
        answer_logprob=args.answer_logprob,
        control=args.control,
        **spec_options(args),
    )


def _run(args: argparse.Namespace) -> int:
    spec = _spec(args)
    labels = parse_labels(args.label or ())
    if args.run_dir is not None and args.out is not None:
        raise SpecError(
            "--out (the folder new run folders go in) and --run-dir (this exact run folder) name two places: "
            "give one of them"
        )
    run_dir = args.run_dir or default_run_dir(spec, args.out or DEFAULT_RUNS)
    judges = judges_named(args)
    check_judges(judges, args.rubric)  # a misnamed judge or rubric is found before the run, not after
    trackers = open_trackers(args.log or ())  # so is a tracker not installed
    replicas, address = _executor(args)
    progress = not args.no_progress
    keep = args.keep_too_long
    result = run_spec(
        spec, run_dir, progress, args.order, replicas=replicas, address=address, keep_too_long=keep,
        labels=labels,
    )  # fmt: skip
    judge_errors = _judge_folder(result.folder, judges, args) if judges else 0
    print(f"run folder: {result.folder}")
    print(f"samples written: {result.written}, already done: {result.skipped}, errors: {result.errors}")
    print(
        f"time: {result.seconds:.1f} s, of which {result.backend_seconds:.1f} s in the model "
        f"(fathom's own share: {result.harness_share:.1%})"
    )
    _print_summary(result.folder)
    for line in log_run(trackers, result.folder):  # after the folder is complete; a failure only warns
        print(f"logged to {line}")
    if result.retryable:
        print(
            f"fathom: {result.retryable} samples ended in backend errors (the server failed or timed out): "
            f"run the same command again to retry them (--run-dir {result.folder})",
            file=sys.stderr,
        )
    if result.unretryable:
        print(
            f"fathom: {result.unretryable} samples ended in errors a retry cannot mend (a prompt too long "
            "for the backend, a missed length): see report.html's failures",
            file=sys.stderr,
        )
    return SAMPLE_ERRORS if result.retryable or result.unretryable or judge_errors else 0


def _executor(args: argparse.Namespace) -> tuple[int | None, str | None]:
    """--executor ray's replicas (1 unless given) and address; without it they would do nothing, and
    are refused."""
    if args.executor == "ray":
        return (1 if args.replicas is None else args.replicas), args.address
    if args.replicas is not None or args.address is not None:
        raise SpecError("--replicas and --address go with --executor ray")
    return None, None


def _print_summary(folder: Path) -> None:
    summary = read_summary(folder)
    for line in summary_text(summary) if summary is not None else []:
        print(line)


def _judge_folder(folder: Path, judges: list[str], args: argparse.Namespace) -> int:
    done = judge_run(folder, judges, args.rubric, args.judge_retries, show_progress=not args.no_progress)
    report(folder)
    print(f"judgements: {done.judged} new, {done.reused} already made, {done.errors} unreadable")
    if done.errors:
        print(
            f"fathom: {done.errors} judgements gave no readable verdict after their retries: run "
            f"'fathom judge {folder}' with the same judges to ask them again",
            file=sys.stderr,
        )
    return done.errors


def _judge(args: argparse.Namespace) -> int:
    if args.qualify:
        return qualify_command(args)
    if args.run_dir is None:
        raise SpecError("name the run folder to judge, or --qualify to qualify the judges on a labelled set")
    errors = _judge_folder(args.run_dir, judges_named(args), args)
    _print_summary(args.run_dir)
    return SAMPLE_ERRORS if errors else 0


def _plan(args: argparse.Namespace) -> None:
    if args.list:
        print("\n".join(list_text()))
        return
    if not args.task:
        raise SpecError("name a task to plan, e.g. fathom plan niah --arch llama-3.1-8b (fathom plan --list)")
    if args.detect is not None:  # refused before the plan's work, not after its table
        check_detect(args.detect, args.base_accuracy, args.alpha)
    plan = plan_sweep(_spec(args), plan_architecture(args), plan_setup(args), args.order)
    print("\n".join(plan_text(plan)))
    if args.detect is not None:
        print("\n".join(detect_text(plan, args.detect, args.base_accuracy, args.alpha)))
    if args.json:
        write_plan(plan, args.json)
        print(f"wrote {args.json} (every cell)")


def _report(args: argparse.Namespace) -> None:
    report(args.run_dir, args.threshold, args.baseline)
    plots = sorted(p.name for p in args.run_dir.glob("*.png"))
    print(f"wrote summary.json, report.html and {', '.join(plots)} in {args.run_dir}")
    _print_summary(args.run_dir)
    if args.open:
        print(open_page(args.run_dir / REPORT))


def _trap(args: argparse.Namespace) -> None:
    trap(args.runs, args.out)
    print(f"wrote {args.out}")


def _models(args: argparse.Namespace) -> None:
    for model in LOCAL_MODELS:
        path, where = model_state(model)
        print(f"{model.shorthand:<14} {model.description}; {where}")
        if path:
            print(f"{'':<14} use as llamacpp:{model.shorthand} or hf:{model.shorthand}")
    print(f"{'sim:*':<14} simulated: {', '.join(f'sim:{name}' for name in ARCHETYPES)}")
    print("backends, named as --model BACKEND:MODEL:")
    for listed in registry.BACKEND.listed():
        entry = listed.entry
        origin = "" if listed.origin == registry.BUILT_IN else f" [plugin {listed.origin}]"
        scores = "; reads log-probabilities" if entry.scores else ""
        print(f"  {listed.name:<10} {entry.summary}{origin}{scores}; {entry.status()}")


def _compare(args: argparse.Namespace) -> int:
    trackers = open_trackers(args.log or ())
    comparison = compare_runs(args.base, args.new, args.alpha)
    out = args.out or args.new / f"compare-{args.base.resolve().name}"
    data, figure = write_comparison(comparison, out)
    print("\n".join(comparison_text(comparison)))
    print(f"wrote {data}, {figure} and {data.with_name(COMPARISON_HTML)}")
    for line in log_comparison(trackers, comparison, out):
        print(f"logged to {line}")
    # 1 on a regression, so a training pipeline can gate a checkpoint on this command; flagged
    # controls only warn (COMPARE_DESCRIPTION in arguments.py says why).
    return 1 if comparison.verdict == "regressed" else 0


def _repair(args: argparse.Namespace) -> None:
    moved = RunFolder(args.run_dir).repair(args.set_aside_newer)
    where = args.run_dir / QUARANTINE
    print(f"moved {moved} damaged lines aside to {where}" if moved else "nothing to repair")


def _runs(args: argparse.Namespace) -> None:
    if args.index is not None:
        entries, where = indexed_entries(args.index, args.folder), args.folder or args.index
    else:
        where = args.folder or Path("runs")
        entries = list_runs(where)
    print("\n".join(runs_text(entries)) if entries else f"no run folders in {where}")


def _gallery(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    page = gallery(args.out)
    print(f"wrote {page} ({time.perf_counter() - started:.1f} s); open it in a browser")


def _export(args: argparse.Namespace) -> None:
    done = write_examples(export_spec(args), args.count, args.out, args.force)
    print(f"wrote {done.count} training examples over {done.cells} cells to {done.path}")


def _export_check(args: argparse.Namespace) -> int:
    result = check_export(args.export, args.runs)
    print("\n".join(check_text(result)))
    return 1 if result.overlaps else 0  # 1, as compare's regression: a pipeline can gate on it


def _suites(args: argparse.Namespace) -> None:
    files = make_demo(args.folder, args.items, args.seed, args.force)
    print(f"wrote {', '.join(p.name for p in files)} in {args.folder}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    _show_warnings()
    try:
        handlers: dict[str, Callable[[argparse.Namespace], int | None]] = {
            "run": _run,
            "plan": _plan,
            "report": _report,
            "trap": _trap,
            "models": _models,
            "compare": _compare,
            "repair": _repair,
            "runs": _runs,
            "gallery": _gallery,
            "export": _export,
            "export-check": _export_check,
            "export-lm-eval": lm_eval_command,
            "suites": _suites,
            "judge": _judge,
            "series": series_command,
            "import-inspect": import_inspect_command,
            "index": index_command,
        }
        status = handlers[args.command](args)
    except FathomError as exc:
        print(f"fathom: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file fathom had to read or write; which one, and why
        where = f" {exc.filename}" if exc.filename else ""
        print(f"fathom: error: {_one_line(f'cannot use{where}: {exc.strerror or exc}')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "fathom: interrupted; finished samples are saved, run the same command to resume", file=sys.stderr
        )
        return 130
    return status or 0


def _one_line(message: str) -> str:
    """A message as one line: control characters from the user's input (a newline in a value) are
    shown escaped, as Python writes them."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], message)


class _Warnings(logging.Handler):
    """The library's warnings (a damaged cache rebuilt, lines moved aside), one line each on the
    stderr of the moment (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"fathom: warning: {_one_line(record.getMessage())}", file=sys.stderr)


def _show_warnings() -> None:
    logger = logging.getLogger("fathom")
    if not any(isinstance(h, _Warnings) for h in logger.handlers):
        logger.addHandler(_Warnings(logging.WARNING))
        logger.setLevel(logging.WARNING)
        logger.propagate = False
