"""What machine a benchmark ran on: CPU model and the flags that decide its fast paths."""

from __future__ import annotations

from pathlib import Path

import torch

RELEVANT_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def cpu_name() -> str:
    """ "MODEL (flags: ...)" from /proc/cpuinfo, listing only `RELEVANT_FLAGS`."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return "unknown CPU"
    first_processor = cpuinfo.read_text().split("\n\n", 1)[0]
    fields = {
        key.strip(): value.strip()
        for key, value in (line.split(":", 1) for line in first_processor.splitlines() if ":" in line)
    }
    flags = set(fields.get("flags", "").split())
    present = [flag for flag in RELEVANT_FLAGS if flag in flags]
    wanted = " ".join(present) or "none of " + "/".join(RELEVANT_FLAGS)
    return f"{fields.get('model name', '?')} (flags: {wanted})"


def machine_line(threads: int) -> str:
    """One line for a benchmark's header: CPU, torch version, threads."""
    return f"CPU: {cpu_name()}; torch {torch.__version__}; {threads} threads"
