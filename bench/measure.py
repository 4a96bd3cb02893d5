"""Wall time and memory of a benchmark's subprocess: the summed PSS of the process and all
its descendants (forked mining workers share the index pages, so PSS counts them once; a JVM
is one process), sampled every 0.2 s, and the summed RSS beside it. Linux /proc only."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path
from typing import Any


def process_tree(pid: int) -> list[int]:
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    stack.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return out


def tree_memory_kib(pid: int) -> tuple[int, int]:
    """(summed PSS, summed RSS) of a process tree, KiB."""
    pss = rss = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError), open(f"/proc/{p}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
    return pss, rss


def run_measured(command: list[str], timeout: float | None = None, stdout: Path | None = None,
                 stderr: Path | None = None, interval: float = 0.2) -> dict[str, Any]:
    """Run ``command`` (its stdout and stderr to these files, or discarded). Returns wall
    seconds, return code, whether it finished within ``timeout`` (else its whole process tree
    is killed), and the peak summed PSS / RSS in MiB."""
    started = time.perf_counter()
    same = stderr is not None and stderr == stdout
    err_path = os.devnull if same or stderr is None else stderr
    with open(stdout or os.devnull, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(command, stdout=out,
                                stderr=subprocess.STDOUT if same else err)
        peak_pss = peak_rss = 0
        finished = True
        while proc.poll() is None:
            pss, rss = tree_memory_kib(proc.pid)
            peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
            if timeout is not None and time.perf_counter() - started > timeout:
                for p in reversed(process_tree(proc.pid)):
                    with contextlib.suppress(OSError):
                        os.kill(p, 9)
                finished = False
                proc.wait()
                break
            time.sleep(interval)
    return {"seconds": time.perf_counter() - started, "returncode": proc.returncode, "finished": finished,
            "peak_pss_mib": peak_pss / 1024, "peak_rss_mib": peak_rss / 1024}
