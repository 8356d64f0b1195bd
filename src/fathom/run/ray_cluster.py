"""The Ray cluster a sweep runs on (``fathom.run.distributed``): joined at an address, or started on
this machine, and checked for room before any replica is made; and what each replica reserves in it.

Everything here runs before the run folder is touched: an address that nothing answers at, a cluster
too small for the replicas asked for, or a process already on another cluster, is refused first.
"""

from __future__ import annotations

import os
import socket
from types import ModuleType

from fathom.backends.base import split_options
from fathom.errors import FathomError, SpecError

# How long to wait for a Ray address to answer: ray.init retries an unreachable one for minutes.
CONNECT_SECONDS = 10.0
# A local cluster's object store: records and cell lists are small, Ray's default is 30% of memory.
OBJECT_STORE_BYTES = 128 << 20


def connect(ray: ModuleType, address: str | None, cpus: int) -> bool:
    """Connect to the cluster at ``address``, or start a local one with at least ``cpus`` logical
    CPUs; whether this call connected (and so disconnects at the end). A caller already connected
    keeps its connection."""
    if address is not None:
        _check_reachable(address)
    if ray.is_initialized():
        if address is not None:  # which cluster this process is on, Ray does not say: refuse to guess
            raise FathomError(f"this process is already connected to a Ray cluster: leave out {address}")
        return False
    quiet = {"log_to_driver": False, "configure_logging": False}
    if address is None:
        # Enough logical CPUs for the replicas asked for: on one machine the user decides how many
        # share its cores (simulated and HTTP replicas mostly wait).
        ray.init(
            num_cpus=max(os.cpu_count() or 1, cpus),
            include_dashboard=False,
            object_store_memory=OBJECT_STORE_BYTES,
            **quiet,
        )
        return True
    try:
        ray.init(address=address, **quiet)
    except (ConnectionError, ValueError) as exc:  # no cluster found; ray:// without ray[client]
        raise FathomError(f"cannot connect to the Ray cluster at {address}: {exc}") from None
    return True


def _check_reachable(address: str) -> None:
    """Refuse, in seconds, a ``HOST:PORT`` that nothing answers at; ``auto`` and ``ray://`` addresses
    Ray resolves itself, and fails on at once."""
    if address == "auto" or "://" in address:
        return
    host, colon, port = address.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise SpecError(f"Ray address '{address}' is not HOST:PORT (e.g. 10.0.0.5:6379), auto or ray://...")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise FathomError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}): start one there with "
            "'ray start --head', or leave out --address to run on a local one"
        ) from None


def replica_cpus(model: str) -> int:
    """The CPUs one replica takes: llama.cpp's ``threads`` where given, else one."""
    prefix, _, rest = model.partition(":")
    return _count(split_options(rest)[1].get("threads")) if prefix == "llamacpp" else 1


def _count(setting: str | None) -> int:
    """A count a backend setting gives (threads, GPUs), or 1: where it is no count, the replica's
    backend refuses it with its own message."""
    return int(setting) if setting is not None and setting.isdigit() and int(setting) > 0 else 1


def replica_resources(model: str, cluster_gpus: float) -> dict[str, int]:
    """What Ray reserves for one replica of ``model``: its CPUs, and, on a cluster with GPUs, those
    its backend loads the model onto (vLLM's tensor-parallel ``tp``; transformers' one unless its
    ``device`` is the CPU)."""
    prefix, _, rest = model.partition(":")
    options = split_options(rest)[1]
    gpus = 0
    if cluster_gpus > 0 and prefix == "vllm":
        gpus = _count(options.get("tp"))
    elif cluster_gpus > 0 and prefix == "hf":
        gpus = int(not options.get("device", "auto").startswith(("cpu", "mps")))
    return {"num_cpus": replica_cpus(model), "num_gpus": gpus}


def check_room(cluster: dict[str, float], replicas: int, need: dict[str, int]) -> None:
    """Refuse a sweep whose replicas cannot all be placed at once: Ray would wait for them forever."""
    for key, name in (("num_cpus", "CPU"), ("num_gpus", "GPU")):
        have = cluster.get(name, 0.0)
        if replicas * need[key] > have:
            raise SpecError(
                f"{replicas} replicas need {replicas * need[key]} {name}s ({need[key]} each) and the Ray "
                f"cluster has {have:g}: lower --replicas"
            )
