r"""The machine: which device to train on, where a network already is, whether it computes in
bfloat16, and how the process allocates memory.

``device=None``, wherever capsedu takes a device with a network, means the network's own device
(:func:`model_device`); :func:`default_device` chooses one when there is no network yet.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import sys
from pathlib import Path

import torch

from capsedu._validate import require_int


def default_device() -> torch.device:
    r"""CUDA if available, else Apple's MPS, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def model_device(model: torch.nn.Module) -> torch.device:
    r"""Where ``model`` is: the device of its first parameter (else buffer); else the CPU."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    first = next(itertools.chain(model.parameters(), model.buffers()), None)
    return torch.device("cpu") if first is None else first.device


def require_model_device(model: torch.nn.Module, device: str | torch.device | None) -> torch.device:
    r"""The device ``model`` runs on, for functions that run a network where it is: its own
    (:func:`model_device`) when ``device`` is None; a ``device`` that is not the model's raises
    ``ValueError`` naming both (move the model with ``model.to(device)`` first). ``"cuda"``
    without an index matches a model on any CUDA device."""
    found = model_device(model)
    if device is None:
        return found
    asked = torch.device(device)
    indices = {asked.index, found.index} - {None}  # "cuda" is any CUDA device, "cpu" has none
    if asked.type != found.type or len(indices) > 1:
        raise ValueError(f"device={str(asked)!r} but the model is on {str(found)!r}: pass "
                         f"device=None (the model's own device) or move the model with "
                         f"model.to({str(asked)!r}) first")
    return found


BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo's names of the bfloat16 instructions


def bfloat16_problem(device: str | torch.device) -> str:
    r"""'' when ``device`` computes in bfloat16 natively, else why not (in words).

    On a CPU that means AVX-512 BF16 or AMX (read from ``/proc/cpuinfo``; elsewhere from oneDNN):
    without them PyTorch emulates bfloat16 with float32 instructions, slower than float32 itself.
    """
    device = torch.device(device)
    if device.type == "cuda":
        return "" if torch.cuda.is_bf16_supported() else "this GPU has no bfloat16 arithmetic"
    if device.type != "cpu":
        return f"bfloat16 autocast is not offered on {device.type} by capsedu"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        flags = set(cpuinfo.read_text().split())
        found = [flag for flag in BF16_CPU_FLAGS if flag in flags]
        return "" if found else ("this CPU has neither AVX-512 BF16 nor AMX (no avx512_bf16 or amx_bf16 "
                                 "in /proc/cpuinfo): bfloat16 would be emulated, slower than float32")
    supported = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return "" if supported else "oneDNN reports no bfloat16 support on this CPU"


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, <malloc.h>


def reuse_large_allocations(limit_bytes: int = 1 << 30) -> bool:
    r"""Let glibc keep freed blocks of up to ``limit_bytes`` for reuse; True if it was set.

    By default glibc gives every block above 32 MiB straight back to the operating system when
    it is freed, so the next tensor of that size costs fresh pages and a page fault per 4 KiB.
    EM routing's votes and their squared deviations (about 60 MB each at batch 32 in lesson 11's
    network) are allocated and freed several times a step: on this course's 2-core machine a
    training step of :class:`capsedu.nets.matrix_capsnet.MatrixCapsNet` went from 1.05 s to
    0.50 s with this setting (the CapsNet, whose tensors are smaller, gains nothing measurable).
    The price: memory freed by PyTorch stays with the process (its resident size stays at its
    peak) instead of going back to the system. It changes the whole process, so it is a
    function you call, not something importing capsedu does; on anything but Linux with glibc
    it does nothing and returns False.
    """
    require_int("limit_bytes", limit_bytes, minimum=1, maximum=(1 << 31) - 1)
    if not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, limit_bytes)
                    and libc.mallopt(_M_TRIM_THRESHOLD, 2 * limit_bytes - 1))
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
