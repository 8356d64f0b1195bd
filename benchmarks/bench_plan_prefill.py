"""The plan's prefill estimate beside a measured prefill: a randomly initialised model of a preset's
shape (Llama-3.1-8B by default) in transformers, bf16, one prompt of each length through the model
with the logits of the last position only, as ``fathom plan`` prices a prefill.

For each length: the measured seconds (the median of ``--repeats`` after one warm-up), the plan's
estimate at ``--utilisation`` (by default the calibrated ``PREFILL_MFU``) of the GPU's dense BF16
peak, their ratio, and the utilisation the measurement implies (the plan's FLOPs over measured
seconds x peak). Results go to ``results/plan_prefill.json`` with the machine. On a GPU, with the
preset's every layer, each length is also printed as a ``Measurement(...)`` to add to
``src/fathom/plan/calibration.py``'s ``MEASUREMENTS`` (then paste ``calibration_table()`` into
docs/plan.md again): the calibration's measured row of fathom's own.

This needs a GPU: on one H100, ``python benchmarks/bench_plan_prefill.py --gpu h100`` runs 8k to 128k
in a few minutes (16 GB of weights; SDPA picks FlashAttention for bf16 on CUDA). ``--device cpu
--layers 2 --lengths 256,512`` checks the script itself on a laptop; its ratio means nothing there,
since the plan's peak is the GPU's. ``--layers N`` keeps the preset's width with fewer layers
(the estimate is scaled to the same N), where memory or time is short.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fathom.plan.arch import Architecture
from fathom.plan.calibration import Measurement
from fathom.plan.costs import PREFILL_MFU, Setup, prefill_seconds
from fathom.plan.gpus import gpu_named
from fathom.plan.presets import PRESETS
from fathom.plan.readers import load_architecture
from fathom.spec import parse_lengths

RESULTS = Path(__file__).parent / "results" / "plan_prefill.json"


def build_model(arch: Architecture, device: str, attention: str, longest: int) -> Any:
    """A model of ``arch``'s shape with random weights, in bf16 on ``device``: nothing downloaded."""
    import torch
    import transformers

    config = transformers.LlamaConfig(
        num_hidden_layers=arch.layers,
        hidden_size=arch.hidden,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads,
        head_dim=arch.head_dim,
        intermediate_size=arch.intermediate,
        vocab_size=arch.vocab,
        max_position_embeddings=longest,
        tie_word_embeddings=arch.tied_embeddings,
        attn_implementation=attention,
    )
    with torch.device(device):
        model = transformers.LlamaForCausalLM(config)
    return model.to(torch.bfloat16).eval()


def time_prefill(model: Any, length: int, vocab: int, device: str, repeats: int) -> list[float]:
    """Seconds of one prefill of ``length`` random tokens, ``repeats`` times after a warm-up."""
    import torch

    ids = torch.randint(0, vocab, (1, length), device=device)

    def once() -> float:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        started = time.perf_counter()
        with torch.inference_mode():
            model(ids, logits_to_keep=1, use_cache=True)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - started

    once()
    return [once() for _ in range(repeats)]


def calibration_row(
    arch: str, args: argparse.Namespace, machine: dict[str, str], length: int, seconds: float
) -> Measurement:
    """One measured prefill as the calibration records it: what ran, where, and when."""
    day = datetime.now(UTC).date().isoformat()
    return Measurement(
        "prefill", f"{arch} (random weights)", arch, args.gpu, 1, None, length, 0, round(seconds, 5),
        f"transformers, {args.attention}, bf16", "bench_plan_prefill",
        f"benchmarks/bench_plan_prefill.py on {machine['gpu']}, {day}, {machine['versions']}",
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--arch", default="llama-3.1-8b", help="a preset, or a config.json or model folder")
    parser.add_argument("--gpu", default="h100", help="the GPU whose peak the plan assumes")
    parser.add_argument("--lengths", default="8k,16k,32k,64k,128k")
    parser.add_argument("--layers", type=int, default=None, help="fewer layers than the preset's")
    parser.add_argument("--utilisation", type=float, default=PREFILL_MFU, help="the plan's prefill MFU")
    parser.add_argument("--attention", default="sdpa", help="sdpa or flash_attention_2")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    arch = load_architecture(args.arch)
    if args.layers is not None:
        arch = dataclasses.replace(arch, layers=args.layers)
    gpu = gpu_named(args.gpu)
    setup = Setup(gpu, utilisation=args.utilisation)
    lengths = parse_lengths(args.lengths)
    model = build_model(arch, args.device, args.attention, max(lengths))
    rows = []
    where = f"{args.attention} on {args.device}"
    print(f"{arch.name} ({arch.layers} layers), {where}; plan: {gpu.label} at {args.utilisation:.0%} MFU")
    print(f"{'length':>8} {'measured s':>11} {'plan s':>9} {'ratio':>7} {'implied MFU':>12}")
    for length in lengths:
        measured = statistics.median(time_prefill(model, length, arch.vocab, args.device, args.repeats))
        estimate = prefill_seconds(arch, setup, length, 0, 1)
        implied = arch.prefill_flops(length) / (measured * gpu.bf16_flops)
        ratio = measured / estimate
        rows.append(
            {
                "length": length,
                "measured_s": measured,
                "plan_s": estimate,
                "ratio": ratio,
                "implied_mfu": implied,
            }
        )
        print(f"{length:>8} {measured:>11.3f} {estimate:>9.3f} {ratio:>7.2f} {implied:>12.1%}")
    machine = {"platform": platform.platform(), "python": platform.python_version(), "device": args.device}
    if args.device.startswith("cuda"):
        import torch
        import transformers

        machine["gpu"] = torch.cuda.get_device_name()
        machine["versions"] = f"torch {torch.__version__}, transformers {transformers.__version__}"
        if args.layers is None and arch.name in PRESETS:  # only the preset's own model calibrates it
            print("calibration rows for src/fathom/plan/calibration.py's MEASUREMENTS:")
            for row in rows:
                calibrated = calibration_row(arch.name, args, machine, int(row["length"]), row["measured_s"])
                print(f"    {calibrated!r},")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    config = {k: str(v) for k, v in vars(args).items()}
    report = {"date": datetime.now(UTC).isoformat(), "machine": machine, "config": config, "rows": rows}
    args.output.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
