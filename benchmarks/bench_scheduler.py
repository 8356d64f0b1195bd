"""What a user waits for: the whole ``fathom run niah --model openai:...`` against a simulated
prefix-caching server (``prefix_server.py``), beside a plain continuous pool of the same prompts and
the ideal bound.

The server runs in a thread of this process, on 127.0.0.1; each client runs in a process of its own:

- fathom: the ``fathom`` command installed beside this Python, ``fathom run niah --model
  'openai:sim@URL?concurrency=N' ...``, controls on (its default) and ``--no-control``, each into a
  fresh run folder. Its start-up, its prompt building, its requests, its records and its derived files
  (summary, plots, report) are all inside the command's time.
- pool: the same prompts (built beforehand, here, as the runner builds them for a text backend; the
  server's count of each is memoised then, for every client alike) sent in the runner's order by a
  thread pool of the same concurrency, one keep-alive connection a thread, nothing grouped and no prompt
  waiting for another.
- ideal: every prefix block computed once and all the work spread evenly over the slots (the server's
  ``ideal``); no client reaches it: a prompt that shares a prefix waits for its prefill or computes it again.

Figures, in simulated seconds (``--scale`` real seconds each): the makespan, from the first request's
arrival at the server to its last answer, and its ratio to the ideal; the server's idle time inside it
(no request held); for fathom also the whole command, and its parts before the first request
(start-up, building) and after the last answer (the last records, the derived files). ``--repeats``
rounds, each running every client once, so that the machine's load falls on all of them alike; each
figure's median over them is reported, all runs beside it. The load average before and
after, and the cores, are written with them to ``results/scheduler.json``.

    python benchmarks/bench_scheduler.py               # NIAH 1k-32k x 11 depths x 3, 8 slots, 16 in flight
    python benchmarks/bench_scheduler.py --lengths 1k --samples 1 --repeats 1    # a quick check
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench_schedule_plan import sweep
from prefix_server import Engine, PrefixServer, Served, serving

import fathom
from fathom.prompts.tokenizers import load_tokenizer
from fathom.spec import RunSpec, parse_depths, parse_lengths
from fathom.units import parse_count

TOKENIZER = "cl100k_base"
GOAL = 1.3  # issue #31: fathom's makespan, controls on, at most this many times the ideal
Prompt = tuple[str, int]  # its text, and the most new tokens asked for
Client = Callable[[str], None]  # sends one sweep to the server at a URL


def fathom_run(args: argparse.Namespace, control: bool, folders: Path) -> Client:
    """The ``fathom run`` command, as a user types it, into a new run folder each time."""
    command = Path(sys.executable).with_name("fathom")
    if not command.exists():
        raise SystemExit(f"no fathom command beside {sys.executable}: pip install -e . in this virtualenv")

    def send(url: str) -> None:
        # No retries: the server never fails here, and a failure must show, not be hidden by a retry.
        model = f"openai:sim@{url}?concurrency={args.concurrency}&retries=1&timeout=3600"
        options = ["--lengths", args.lengths, "--depths", args.depths, "--samples", str(args.samples)]
        folder = Path(tempfile.mkdtemp(dir=folders)) / "run"
        line = [str(command), "run", "niah", "--model", model, "--tokenizer", TOKENIZER, *options]
        line += ["--run-dir", str(folder), "--no-progress", *([] if control else ["--no-control"])]
        done = subprocess.run(line, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"fathom run failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")

    return send


def pool(url: str, prompts: Sequence[Prompt], concurrency: int) -> None:
    """Send every prompt to the completions endpoint, ``concurrency`` at a time, in their order: a
    continuous pool (a thread takes the next prompt as soon as its answer is back)."""
    where = urlsplit(url)
    local = threading.local()
    connections: list[http.client.HTTPConnection] = []

    def send(prompt: Prompt) -> None:
        if not hasattr(local, "connection"):
            local.connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=3600)
            connections.append(local.connection)
        body = {"model": "sim", "prompt": prompt[0], "max_tokens": prompt[1], "temperature": 0}
        headers = {"Content-Type": "application/json"}
        local.connection.request("POST", f"{where.path}/completions", json.dumps(body), headers)
        reply = local.connection.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise RuntimeError(f"HTTP {reply.status}: {data[:200]!r}")

    try:
        with ThreadPoolExecutor(concurrency) as threads:
            for _ in threads.map(send, prompts):
                pass
    finally:
        for connection in connections:
            connection.close()


def pooled(senders: ProcessPoolExecutor, prompts: Sequence[Prompt], concurrency: int) -> Client:
    """The pool, in the sending process (started beforehand, so that no timing holds its start)."""
    return lambda url: senders.submit(pool, url, prompts, concurrency).result()


def idle(log: Sequence[Served]) -> float:
    """The simulated seconds between the first arrival and the last answer with no request held."""
    spans = sorted((served.arrived, served.done) for served in log)
    waited, reach = 0.0, spans[0][0]
    for start, end in spans:
        waited += max(0.0, start - reach)
        reach = max(reach, end)
    return waited


def measure(server: PrefixServer, client: Client, ideal: float, prompts: int) -> dict[str, Any]:
    """One client's sweep, timed by the server's clock (started at 0 just before the client)."""
    server.reset()
    client(server.url)
    ended, log = server.now(), server.log
    if len(log) != prompts:
        raise SystemExit(f"the server answered {len(log)} requests, not the sweep's {prompts}")
    first, last = min(s.arrived for s in log), max(s.done for s in log)
    return {
        "makespan": round(last - first, 2),
        "x_ideal": round((last - first) / ideal, 3),
        "server_idle": round(idle(log), 2),
        "whole": round(ended, 2),
        "whole_x_ideal": round(ended / ideal, 3),
        "before_first_request": round(first, 2),
        "after_last_answer": round(ended - last, 2),
        "cache_hits": round(sum(s.cached_tokens for s in log) / sum(s.prompt_tokens for s in log), 4),
        "most_in_flight": server.most_in_flight,
        "tokenised_in_timing": server.misses,
    }


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the runs (the ratio's too, so that it is the median run's), and the runs."""
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]} | {"runs": runs}


def source() -> dict[str, Any]:
    """Which fathom ran: its folder, and the commit and changed files where that is a git checkout."""
    where = Path(fathom.__file__).parent

    def git(*command: str) -> str | None:
        done = subprocess.run(["git", "-C", str(where), *command], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    changed = git("status", "--porcelain", "--", ".")
    return {"path": str(where), "commit": git("rev-parse", "HEAD"), "changed": (changed or "").splitlines()}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", default="1k,2k,4k,8k,16k,32k")
    parser.add_argument("--depths", default="11")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight: fathom and the pool")
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--cache", default="1M", help="the prefix cache's capacity in tokens")
    parser.add_argument("--prefill", type=float, default=Engine.prefill, help="tokens per second per slot")
    parser.add_argument("--decode", type=float, default=Engine.decode, help="tokens per second per slot")
    parser.add_argument("--scale", type=float, default=Engine.scale, help="real seconds per simulated one")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--note", default="", help="written into the results, e.g. which fathom this is")
    results = Path(__file__).parent / "results"
    parser.add_argument("--output", type=Path, default=results / "scheduler.json")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    load_before = os.getloadavg()
    spec = RunSpec(
        "niah",
        "openai:sim@http://127.0.0.1/v1",
        TOKENIZER,
        parse_lengths(args.lengths),
        parse_depths(args.depths),
        args.samples,
    )
    requests = sweep(spec)  # controls first, then the samples: the runner's order
    sets: dict[str, list[Prompt]] = {
        "controls on": [(r.text or "", r.max_new_tokens) for r in requests],
        "controls off": [
            (r.text or "", r.max_new_tokens) for r in requests if not r.sample_id.startswith("control|")
        ],
    }
    engine = Engine(args.slots, parse_count(args.cache), args.prefill, args.decode, scale=args.scale)
    spawn = multiprocessing.get_context("spawn")  # not a fork of a process whose server thread runs
    with (
        serving(load_tokenizer(TOKENIZER), engine) as server,
        ProcessPoolExecutor(1, mp_context=spawn) as senders,
        tempfile.TemporaryDirectory() as folders,
    ):
        server.warm([text for text, _ in sets["controls on"]])
        ideal = {name: server.ideal(*zip(*prompts, strict=True)) for name, prompts in sets.items()}
        senders.submit(int).result()
        clients: dict[str, tuple[Client, str]] = {
            "fathom run (controls on, the default)": (fathom_run(args, True, Path(folders)), "controls on"),
            "fathom run --no-control": (fathom_run(args, False, Path(folders)), "controls off"),
            "pool, controls on": (pooled(senders, sets["controls on"], args.concurrency), "controls on"),
            "pool, controls off": (pooled(senders, sets["controls off"], args.concurrency), "controls off"),
        }
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in clients}
        for round_ in range(args.repeats):
            for name, (client, prompts) in clients.items():
                runs[name].append(measure(server, client, ideal[prompts], len(sets[prompts])))
                print(f"round {round_ + 1}, {name}: {runs[name][-1]}", flush=True)
        prompt_tokens = {name: sum(server.count(p) for p, _ in prompts) for name, prompts in sets.items()}
    results = {name: medians(figures) for name, figures in runs.items()}
    ours, theirs = results["fathom run (controls on, the default)"], results["pool, controls on"]
    report = {
        "sweep": {
            "lengths": list(spec.lengths),
            "depths": len(spec.depths),
            "samples": spec.samples,
            "prompts": {name: len(prompts) for name, prompts in sets.items()},
            "prompt_tokens": prompt_tokens,
        },
        "engine": dataclasses.asdict(engine),
        "concurrency": args.concurrency,
        "repeats": args.repeats,
        "fathom": source(),
        "note": args.note,
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cores": os.cpu_count(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "date": datetime.now(UTC).isoformat(timespec="minutes"),
        "ideal": {name: round(seconds, 2) for name, seconds in ideal.items()},
        "results": results,
        "goals": {
            "controls_on_x_ideal": ours["x_ideal"],
            "at_most_1.3x_ideal": ours["x_ideal"] <= GOAL,
            "controls_on_over_pool": round(ours["makespan"] / theirs["makespan"], 3),
            "no_worse_than_pool": ours["makespan"] <= theirs["makespan"],
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report, args.scale))


def table(report: dict[str, Any], scale: float) -> str:
    columns = ("makespan", "x ideal", "idle", "whole", "x ideal", "before", "after", "cached")
    lines = [
        f"{'client':<38}" + "".join(f"{c:>9}" for c in columns) + f"  (simulated s, {scale:g} real s each)"
    ]
    for name, r in report["results"].items():
        figures = (r["makespan"], r["x_ideal"], r["server_idle"], r["whole"], r["whole_x_ideal"])
        figures += (r["before_first_request"], r["after_last_answer"])
        lines.append(f"{name:<38}" + "".join(f"{f:9.2f}" for f in figures) + f"{r['cache_hits']:9.1%}")
    machine = report["machine"]
    lines.append(
        f"ideal: {report['ideal']}; load {machine['load_before']} -> {machine['load_after']}, "
        f"{machine['cores']} cores"
    )
    lines.append(f"goals: {report['goals']}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
