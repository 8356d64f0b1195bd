"""The openai backend's own CPU per request: what the client costs when the server costs nothing.

A zero-latency server (``prefix_server.py`` with its clock scaled to nothing, 1,000 slots) runs in a
process of its own, so that its work is not counted; this process sends ``--requests`` completions of
a ``--tokens``-token prompt at ``--concurrency`` in flight through ``OpenAIBackend.generate`` and
reports its CPU seconds per request (``time.process_time``: every thread of the client). Issue #31
asks for at most 1.5 ms at 16 in flight.

Several ``--concurrency`` values are measured in turn against one server: the cost per request must
not grow with the window (``--concurrency 4 300``: hundreds in flight through one connection pool once
cost 8 times as much, since httpcore scans every connection of a pool for each request). This is
the time budget that tests/test_scheduler.py once asserted; the test keeps the behaviour (no pool of
more than ``jsonhttp.LANE`` connections), this measures what it saves.

``--without-sniffio`` measures the client as on a machine without sniffio: httpcore looks for it on
every lock it takes, and a missing module is a search of the whole path each time.

    python benchmarks/bench_client.py [--requests 400] [--tokens 16000] [--concurrency 16 [300 ...]]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SERVER = """
import sys, time
sys.path.insert(0, {here!r})
from prefix_server import Engine, serving
from fathom.prompts.tokenizers import load_tokenizer
with serving(load_tokenizer("cl100k_base"), Engine(slots=1000, scale=1e-6)) as server:
    print(server.url, flush=True)
    time.sleep(3600)
"""


class _WithoutSniffio:
    """A finder that makes ``import sniffio`` fail as a missing module does: after searching the path."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "sniffio":
            for entry in sys.path:
                importlib.machinery.PathFinder.find_spec("sniffio_absent", [entry])  # the search it costs
            raise ModuleNotFoundError("No module named 'sniffio'")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--tokens", type=int, default=16_000, help="about this many tokens a prompt")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16], help="one run at each")
    parser.add_argument("--without-sniffio", action="store_true")
    args = parser.parse_args()
    if args.without_sniffio:
        sys.meta_path.insert(0, _WithoutSniffio())  # type: ignore[arg-type]
        sys.modules.pop("sniffio", None)

    code = SERVER.format(here=str(Path(__file__).parent))
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        for concurrency in args.concurrency:
            print(measure(f"bench@{url}?concurrency={concurrency}&retries=1", args), flush=True)
    finally:
        server.kill()
        server.wait()


def measure(model: str, args: argparse.Namespace) -> str:
    """One line: the client's CPU per request through ``model``, the wall time and the load."""
    import numpy as np

    from fathom.backends.base import Request
    from fathom.backends.openai import OpenAIBackend

    backend = OpenAIBackend(model, "cl100k_base")
    sentence = "The grass is green. The sky is blue. "
    text = sentence * max(1, args.tokens // 10) + "What is the special magic number for amber-otter?"
    ids = np.array(backend.tokenizer.encode(text), dtype=np.int32)

    def requests(count: int, tag: str) -> list[Request]:
        return [Request(f"{tag}{i}", ids, 8, text=f"{text} ({tag}{i})") for i in range(count)]

    backend.generate(requests(32, "warm"))  # connections open, imports done
    cpu, wall = time.process_time(), time.perf_counter()
    answers = backend.generate(requests(args.requests, "r"))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    errors = sum(1 for answer in answers if answer.error is not None)
    return (
        f"{args.requests} requests of {len(ids)} tokens at {backend.concurrency} in flight"
        f"{' without sniffio' if args.without_sniffio else ''}: client CPU {1000 * cpu / args.requests:.2f} "
        f"ms a request, wall {wall:.2f} s, {errors} errors; load {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
