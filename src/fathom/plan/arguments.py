"""``fathom plan``'s own options, beside the sweep's that it shares with ``fathom run``."""

from __future__ import annotations

import argparse
from pathlib import Path

from fathom.backends.base import split_options
from fathom.backends.local_models import resolve_model_path
from fathom.errors import SpecError
from fathom.plan.arch import Architecture
from fathom.plan.costs import DECODE_BANDWIDTH, KV_DTYPES, PREFILL_MFU, WEIGHT_DTYPES, Setup
from fathom.plan.gpus import GPUS, gpu_named
from fathom.plan.presets import PRESETS
from fathom.plan.readers import load_architecture

# The backends whose --model names a model file or folder that holds the architecture.
_LOCAL = ("llamacpp", "hf", "vllm")


def add_plan_options(plan: argparse.ArgumentParser) -> None:
    plan.add_argument(
        "--arch",
        default=None,
        help=f"the model's architecture: {', '.join(PRESETS)}, a config.json, a model folder or a .gguf "
        "file; by default --model's file or folder",
    )
    plan.add_argument("--gpu", default="h100", help=f"{', '.join(GPUS)} (fathom plan --list)")
    plan.add_argument("--gpus", type=int, default=1, help="GPUs the sweep is spread over")
    plan.add_argument("--price", type=float, default=None, help="the price of one GPU-hour, for the cost")
    plan.add_argument(
        "--utilisation",
        type=float,
        default=PREFILL_MFU,
        help="assumed share of the GPU's peak FLOP/s that a prefill reaches (MFU; calibrated "
        "on published measurements, docs/plan.md)",
    )
    plan.add_argument(
        "--decode-utilisation",
        type=float,
        default=DECODE_BANDWIDTH,
        help="assumed share of the memory bandwidth that a decode step reaches (calibrated likewise)",
    )
    plan.add_argument("--kv-dtype", default="bf16", help=f"the KV cache's: {', '.join(KV_DTYPES)}")
    plan.add_argument(
        "--weights-dtype",
        default=None,
        help=f"{', '.join(WEIGHT_DTYPES)}; by default as the model file stores them (a GGUF), else bf16",
    )
    plan.add_argument("--json", type=Path, default=None, help="write every cell's numbers to this file")
    plan.add_argument(
        "--detect",
        type=float,
        default=None,
        metavar="POINTS",
        help="also say the samples per cell (--samples) that fathom compare's gate needs to detect a drop "
        "of this many points at one length and at one cell with 80%% power, and what they cost",
    )
    plan.add_argument(
        "--base-accuracy",
        type=float,
        default=0.9,
        help="with --detect: the baseline's accuracy the drop is taken from",
    )
    plan.add_argument("--alpha", type=float, default=0.05, help="with --detect: fathom compare's --alpha")
    plan.add_argument("--list", action="store_true", help="list the architectures and GPUs, and stop")


def plan_setup(args: argparse.Namespace) -> Setup:
    return Setup(
        gpu_named(args.gpu),
        args.gpus,
        args.price,
        args.utilisation,
        args.decode_utilisation,
        args.kv_dtype,
        args.weights_dtype,
    )


def plan_architecture(args: argparse.Namespace) -> Architecture:
    """--arch, else the file or folder that --model names (llamacpp:, hf: or vllm:)."""
    if args.arch:
        return load_architecture(args.arch)
    kind, _, rest = (args.model or "").partition(":")
    if kind in _LOCAL and rest:
        return load_architecture(str(resolve_model_path(split_options(rest)[0])))
    raise SpecError(
        "name the model's architecture: --arch with a preset (fathom plan --list), a config.json, a "
        "model folder or a .gguf file, or a --model of llamacpp, hf or vllm with its file or folder"
    )
