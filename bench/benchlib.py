"""What every benchmark reports about where it ran (imported by the bench scripts)."""
from __future__ import annotations

import os
import platform


def machine() -> str:
    """CPU model, visible cores and OS, e.g. 'AMD EPYC 7B13, 2 cores, Linux 6.1'."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
