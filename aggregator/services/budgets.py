"""Analyses (regressions, weights) under a hard budget, away from the threads that serve intake
and /healthz.

Each analysis runs in a process of its own, forked from a server process that has the analysis
package loaded (multiprocessing's forkserver), niced below the service, with limits the kernel
enforces: CPU seconds (RLIMIT_CPU: SIGXCPU at the limit) and memory (RLIMIT_DATA: the heap and
anonymous mappings, counted beyond what the loaded libraries already hold). The request's
thread waits for its answer at most as many seconds of wall-clock time, then kills it. At most
ANALYSES_AT_ONCE run per service process; one more is refused at once (AnalysisBusy), so the
threads left serve everything else. Which Budget applies depends on the caller: a researcher of
the survey, or the public of a public-results survey (tighter)."""

import contextlib
import multiprocessing
import os
import re
import resource
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ldpsurvey.aggregator.exceptions import AnalysisBusy, AnalysisStopped, DomainError

NICENESS = 10  # an analysis yields the CPU to the service's own threads
GRACE_SECONDS = 1.0  # beyond the budget, for the process to start and its answer to arrive
MIB = 2**20
PRELOADED = ["ldpsurvey.analysis", "ldpsurvey.aggregator.services.analyses"]


@dataclass(frozen=True)
class Budget:
    """What one analysis may cost: checked before it starts (parameters and latent rows, as
    analysis.regression.Size counts them; solver iterations), and enforced while it runs
    (seconds of CPU and of wall-clock time, MiB of memory). `setting`: the settings' suffix
    that names these limits ("" for researchers, "_ANONYMOUS" for the public)."""

    parameters: int
    latent_rows: int
    iterations: int
    seconds: int
    memory_mib: int
    setting: str = ""


LIMITS = {"parameters": "ANALYSIS_PARAMETERS", "latent_rows": "ANALYSIS_LATENT_ROWS",
          "iterations": "ANALYSIS_ITERATIONS", "seconds": "ANALYSIS_SECONDS",
          "memory_mib": "ANALYSIS_MEMORY_MIB"}
PUBLIC = "_ANONYMOUS"  # the settings' suffix for callers who read the results as the public


def budget_from(config, public: bool) -> Budget:
    """The Budget in `config` (the LIMITS settings) for researchers or the public."""
    suffix = PUBLIC if public else ""
    return Budget(**{field: config[name + suffix] for field, name in LIMITS.items()},
                  setting=suffix)


class Runner:
    """Runs analyses for one service process: at most `at_once` at a time, the public's at most
    `at_once` - 1 of them (one at least), so that the public cannot hold every slot and keep a
    survey's researchers out."""

    def __init__(self, researcher: Budget, public: Budget, at_once: int):
        self.researcher, self.public = researcher, public
        self._slots = threading.BoundedSemaphore(at_once)
        self._public_slots = threading.BoundedSemaphore(max(1, at_once - 1))
        self.processes: set = set()  # of the analyses started and not yet ended

    def budget(self, researcher: bool) -> Budget:
        return self.researcher if researcher else self.public

    @contextlib.contextmanager
    def slot(self, budget: Budget) -> Iterator[None]:
        """One of the slots for a caller with this budget, held from before the responses are
        tallied until the analysis ends; AnalysisBusy at once when none is free."""
        gates = [self._slots] if budget.setting != PUBLIC else [self._public_slots, self._slots]
        taken = []
        try:
            for gate in gates:
                if not gate.acquire(blocking=False):
                    raise AnalysisBusy("the server is running as many analyses as it allows "
                                       "at once: try again in a minute")
                taken.append(gate)
            yield
        finally:
            for gate in reversed(taken):
                gate.release()

    def run(self, budget: Budget, function: Callable[..., Any], *args: Any) -> Any:
        """function(*args) in a process of its own within `budget` (module docstring), inside
        one of the caller's slots (slot): its result, or the DomainError it raised.
        AnalysisStopped when it overran its seconds or memory."""
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOADED)
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_limited, daemon=True, args=(
            send, budget.seconds, budget.memory_mib, function, args))
        process.start()
        send.close()
        self.processes.add(process)
        try:
            outcome = None
            # EOF: it died (the kernel's limit, or out of memory) without an answer
            if receive.poll(budget.seconds + GRACE_SECONDS):
                with contextlib.suppress(EOFError):
                    outcome = receive.recv()
        finally:
            if process.is_alive():
                process.kill()
            process.join()
            receive.close()
            self.processes.discard(process)
        if outcome is None or outcome[0] == "memory":
            raise _stopped(budget, process.exitcode, outcome is None)
        if outcome[0] == "refused":
            raise outcome[1]
        return outcome[1]


def _stopped(budget: Budget, exitcode: int | None, silent: bool) -> AnalysisStopped:
    """Why an analysis ended without an answer: its time (killed at the deadline, or by
    RLIMIT_CPU's SIGXCPU) or its memory."""
    timed_out = silent and exitcode in (-signal.SIGKILL, -signal.SIGXCPU)
    what, limit = ((f"{budget.seconds} s", "ANALYSIS_SECONDS") if timed_out
                   else (f"{budget.memory_mib} MiB", "ANALYSIS_MEMORY_MIB"))
    return AnalysisStopped(f"the analysis was stopped at its limit of {what} "
                           f"({limit}{budget.setting}): fit fewer covariates or interactions")


def _limited(send, seconds: int, memory_mib: int, function: Callable[..., Any],
             args: tuple) -> None:
    """In the analysis's process: lower its priority, set its limits, send ("done", result),
    ("refused", DomainError) or ("memory", None)."""
    os.nice(NICENESS)
    _limit(resource.RLIMIT_CPU, seconds)
    _limit(resource.RLIMIT_DATA, _data_bytes() + memory_mib * MIB)
    try:
        outcome = ("done", function(*args))
    except DomainError as error:
        outcome = ("refused", error)
    except MemoryError:
        outcome = ("memory", None)
    send.send(outcome)
    send.close()


def _limit(kind: int, value: int) -> None:
    """Lower the soft and hard limit `kind` to `value` (never above its hard limit now)."""
    _, hard = resource.getrlimit(kind)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))


def _data_bytes() -> int:
    """This process's data segment now (VmData: what RLIMIT_DATA counts)."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"^VmData:\s+(\d+) kB", status, re.MULTILINE).group(1)) * 1024
