"""The GPUs a plan can price: peak dense tensor FLOP/s, memory bandwidth and memory size, each from
its vendor's datasheet (the ``source`` of each row; docs/plan.md lists them too).

Peaks are dense: the datasheets' larger "with sparsity" figures (2:4 structured sparsity) are
twice these and no LLM inference engine here uses them. Memory is the datasheet's GB (10^9 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

from fathom.errors import SpecError

TERA = 1e12
GB = 1e9
# GPUs in one node, joined by NVLink (Infinity Fabric for AMD): the widest tensor-parallel group
# a plan considers. Beyond it, tensor parallelism crosses the network and these estimates fail.
NODE_GPUS = 8


@dataclass(frozen=True)
class Gpu:
    name: str
    label: str
    bf16_flops: float  # dense, per second
    fp8_flops: float | None  # None: no FP8 tensor cores (A100): FP8 weights run at BF16's rate
    bandwidth: float  # bytes per second
    memory: float  # bytes
    source: str


GPUS: dict[str, Gpu] = {
    g.name: g
    for g in (
        Gpu("h100", "NVIDIA H100 SXM 80 GB", 989.4 * TERA, 1978.9 * TERA, 3.35e12, 80 * GB,
            "https://www.nvidia.com/en-us/data-center/h100/"),
        Gpu("h200", "NVIDIA H200 SXM 141 GB", 989.4 * TERA, 1978.9 * TERA, 4.8e12, 141 * GB,
            "https://www.nvidia.com/en-us/data-center/h200/"),
        Gpu("a100-40gb", "NVIDIA A100 SXM 40 GB", 312 * TERA, None, 1.555e12, 40 * GB,
            "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
            "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"),
        Gpu("a100-80gb", "NVIDIA A100 SXM 80 GB", 312 * TERA, None, 2.039e12, 80 * GB,
            "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
            "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"),
        Gpu("l40s", "NVIDIA L40S 48 GB", 362.05 * TERA, 733 * TERA, 0.864e12, 48 * GB,
            "https://www.nvidia.com/en-us/data-center/l40s/"),
        Gpu("mi300x", "AMD Instinct MI300X 192 GB", 1307.4 * TERA, 2614.9 * TERA, 5.3e12, 192 * GB,
            "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"),
    )
}  # fmt: skip


def gpu_named(name: str) -> Gpu:
    gpu = GPUS.get(name.lower())
    if gpu is None:
        raise SpecError(f"unknown GPU '{name}': use one of {', '.join(GPUS)} (fathom plan --list)")
    return gpu
