"""fathom's schedule of requests alone (the plan, prompts built beforehand) against a simulated
prefix-caching server (``prefix_server.py``), beside the old waves of 16, a naive shuffled client, and
the ideal. ``bench_scheduler.py`` times the whole ``fathom run`` instead (prompt building included).

The sweep's prompts are built once, as the runner builds them for a text backend (the no-context
controls included unless ``--no-control``), and the server tokenises each once before any timing.
Each client then sends all of them to the same server, its cache emptied and its clock reset first:

- fathom: ``OpenAIBackend.stream`` (a window of ``--window`` requests in flight, prompts that share a
  long prefix grouped behind a leader), given the runs the runner hands it for this sweep: the
  controls, then the samples (under the runner's 4,096 requests and 2^24 tokens a run).
- waves of 16: the runner's old batches of 16 cells in the runner's order, each sent in its order
  with ``concurrency`` 16 (and 4, the old default) and awaited before the next.
- naive: every prompt in a shuffled order, ``--window`` in flight, nothing grouped.
- ideal: every prefix block computed once, all work spread evenly over the slots (the server's
  ``ideal``: a bound that no order reaches, since a group's followers wait for its leader).

A client's time is the server's, in simulated seconds from its first request's arrival to its last
answer; ``--repeats`` runs of each, the median reported. Results go to ``results/schedule_plan.json``.
Client and server share one process, at about 2 ms a request between them: at the default
``--scale`` (0.5 real seconds a simulated one) that is a hundredth of a short prompt's 0.1 simulated
seconds of decoding, and the run takes a few minutes; at 0.25 fathom's figure grows by 2 to 3
simulated seconds (its 264 short controls go out faster than one process sends them).

    python benchmarks/bench_schedule_plan.py --slots 16 --cache 2M --window 32
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefix_server import Engine, PrefixServer, serving

from fathom.backends.base import Request
from fathom.backends.openai import OpenAIBackend
from fathom.backends.schedule import in_order
from fathom.prompts.tokenizers import load_tokenizer
from fathom.registry import create_task
from fathom.spec import RunSpec, parse_depths, parse_lengths
from fathom.tasks import control
from fathom.tasks.base import Sample
from fathom.units import parse_count

TOKENIZER = "cl100k_base"
Client = Callable[[str], None]  # sends every request to the server at a URL


def sweep(spec: RunSpec) -> list[Request]:
    """The run's requests in the runner's order, built as its ``_request`` builds them for a text
    backend (the text decoded from the ids)."""
    tokenizer = load_tokenizer(spec.tokenizer)
    task = create_task(spec, tokenizer)
    requests = []
    for cell in control.plan(task.cells, spec.control):
        sample = task.prepare(control.sample_cell(cell))
        assert isinstance(sample, Sample)
        if cell.control:
            sample = control.without_context(sample, cell)
        ids = sample.prompt.ids
        requests.append(Request(cell.id, ids, sample.max_new_tokens, text=tokenizer.decode(ids.tolist())))
    return requests


def backend(url: str, window: int) -> OpenAIBackend:
    # No retries: the server never fails here, and a failure must show, not be hidden by a retry.
    return OpenAIBackend(f"sim@{url}?concurrency={window}&retries=1&timeout=3600", TOKENIZER)


def fathom(requests: Sequence[Request], window: int) -> Client:
    controls = [r for r in requests if r.sample_id.startswith("control|")]
    runs = [controls, [r for r in requests if not r.sample_id.startswith("control|")]]

    def send(url: str) -> None:
        client = backend(url, window)
        for run in runs:
            _answered(client.stream(run), len(run))

    return send


def waves(requests: Sequence[Request], concurrency: int) -> Client:
    def send(url: str) -> None:
        client = backend(url, concurrency)
        for start in range(0, len(requests), 16):
            wave = requests[start : start + 16]
            _answered(client.stream(wave, in_order(len(wave))), len(wave))

    return send


def naive(requests: Sequence[Request], window: int, seed: int) -> Client:
    shuffled = list(requests)
    random.Random(seed).shuffle(shuffled)

    def send(url: str) -> None:
        _answered(backend(url, window).stream(shuffled, in_order(len(shuffled))), len(shuffled))

    return send


def _answered(done: Any, count: int) -> None:
    errors = [completion.error for _, completion in done if completion.error is not None]
    if errors:
        raise SystemExit(f"{len(errors)} of {count} requests failed: {errors[0]}")


def measure(server: PrefixServer, client: Client, repeats: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeats):
        server.reset()
        started = time.monotonic()
        client(server.url)
        real = time.monotonic() - started
        log = server.log
        runs.append(
            {
                "seconds": round(max(s.done for s in log) - min(s.arrived for s in log), 2),
                "client_seconds": round(real / server.engine.scale, 2),
                "cache_hits": round(sum(s.cached_tokens for s in log) / sum(s.prompt_tokens for s in log), 4),
                "most_in_flight": server.most_in_flight,
                "requests": len(log),
            }
        )
    # The run of median time, whole (its figures belong together), and all of them.
    return {**sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2], "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", default="1k,2k,4k,8k,16k,32k,64k,128k")
    parser.add_argument("--depths", default="11")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--no-control", action="store_true", help="leave out the no-context controls")
    parser.add_argument("--slots", type=int, default=Engine.slots)
    parser.add_argument("--cache", default="2M", help="the prefix cache's capacity in tokens")
    parser.add_argument("--prefill", type=float, default=Engine.prefill, help="tokens per second per slot")
    parser.add_argument("--decode", type=float, default=Engine.decode, help="tokens per second per slot")
    parser.add_argument("--scale", type=float, default=Engine.scale, help="real seconds per simulated one")
    parser.add_argument("--window", type=int, default=32, help="in flight: fathom, naive (openai default)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="the naive client's shuffle")
    results = Path(__file__).parent / "results"
    parser.add_argument("--output", type=Path, default=results / "schedule_plan.json")
    args = parser.parse_args()
    spec = RunSpec(
        "niah",
        "openai:sim@http://127.0.0.1/v1",
        TOKENIZER,
        parse_lengths(args.lengths),
        parse_depths(args.depths),
        args.samples,
        control=not args.no_control,
    )
    started = time.monotonic()
    requests = sweep(spec)
    texts = [r.text or "" for r in requests]
    engine = Engine(args.slots, parse_count(args.cache), args.prefill, args.decode, scale=args.scale)
    with serving(load_tokenizer(TOKENIZER), engine) as server:
        server.warm(texts)
        print(f"{len(requests)} prompts built and tokenised in {time.monotonic() - started:.1f} s")
        ideal = server.ideal(texts, [r.max_new_tokens for r in requests])
        clients = {
            f"fathom, window {args.window}": fathom(requests, args.window),
            "waves of 16, 16 in flight": waves(requests, 16),
            "waves of 16, 4 in flight (the old default)": waves(requests, 4),
            f"naive shuffled, {args.window} in flight": naive(requests, args.window, args.seed),
        }
        results = {name: measure(server, client, args.repeats) for name, client in clients.items()}
        prompt_tokens, unique = sum(server.count(text) for text in texts), server.unique_tokens(texts)
    results["ideal"] = {"seconds": round(ideal, 2), "cache_hits": round(1 - unique / prompt_tokens, 4)}
    ours, old = results[f"fathom, window {args.window}"], results["waves of 16, 16 in flight"]
    report = {
        "sweep": {
            "lengths": list(spec.lengths),
            "depths": len(spec.depths),
            "samples": spec.samples,
            "controls": spec.control,
            "prompts": len(requests),
            "prompt_tokens": prompt_tokens,
            "unique_tokens": unique,
        },
        "engine": dataclasses.asdict(engine),
        "window": args.window,
        "repeats": args.repeats,
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cores": os.cpu_count(),
        },
        "date": datetime.now(UTC).date().isoformat(),
        "results": results,
        "fathom_vs_ideal": round(ours["seconds"] / ideal, 3),
        "waves_vs_fathom": round(old["seconds"] / ours["seconds"], 3),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'client':<44} {'sim. s':>8} {'x ideal':>8} {'cached':>7} {'in flight':>9}")
    for name, figures in results.items():
        flight = figures.get("most_in_flight", "")
        print(
            f"{name:<44} {figures['seconds']:8.1f} {figures['seconds'] / ideal:8.2f} "
            f"{figures['cache_hits']:7.1%} {flight:>9}"
        )
    print(
        f"fathom: {report['fathom_vs_ideal']}x the ideal (goal <= 1.25), "
        f"{report['waves_vs_fathom']}x faster than the waves of 16 (goal >= 1.5)"
    )


if __name__ == "__main__":
    main()
