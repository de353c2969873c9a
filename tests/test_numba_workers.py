"""The numba backend's worker threads (backends/numba_cpu/threads.py `_Workers`,
`on_all_threads`): every call's work runs on the caller and on the workers, which look for
tasks without the GIL for a while (`_spin`) before they sleep; errors reach the caller,
late workers skip a finished task, and a second caller runs its work alone."""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba (not installed)")

from fnad.backends.numba_cpu import threads  # noqa: E402

needs_two = pytest.mark.skipif(threads.NUM_THREADS < 2,
                               reason="one thread here (FNAD_NUM_THREADS or a 1-CPU machine)")


def _shared(n):
    """work for on_all_threads: claims items 0..n-1, recording which thread took each."""
    claim = itertools.count().__next__
    took = {}

    def work():
        while (c := claim()) < n:
            time.sleep(0.001)                  # no GIL held: the others claim meanwhile
            took[c] = threading.current_thread().name     # (after: the caller must wait)
    return work, took


def test_spin_sees_a_change_and_gives_up_without_one():
    """The spin loop (a few lines of LLVM IR, called through ctypes without the GIL)."""
    flag = np.zeros(1, np.int64)
    assert not threads._spin(flag, 0, 1000)
    flag[0] = 3
    assert threads._spin(flag, 0, 1000)
    assert not threads._spin(flag, 3, 10)


@needs_two
def test_every_item_once_and_the_workers_take_part():
    threads.start_spinning()
    names = set()
    for _ in range(20):
        work, took = _shared(16)
        threads.on_all_threads(work)
        assert sorted(took) == list(range(16))
        names.update(took.values())
    assert threading.current_thread().name in names
    assert any(n.startswith("fnad-numba-") for n in names), names


@needs_two
def test_an_error_in_a_worker_or_the_caller_is_raised_after_all_are_done():
    finished = []

    def work():
        me = threading.current_thread().name
        if me.startswith("fnad-numba-"):
            raise ValueError("from a worker")
        time.sleep(0.05)                       # the worker gets the task meanwhile
        finished.append(me)
    for _ in range(3):
        try:
            threads.on_all_threads(work)
        except ValueError as e:
            assert "from a worker" in str(e)
            break
    else:
        pytest.fail("the worker's ValueError never reached the caller")
    assert finished                            # the caller's own share ran to its end

    def caller_fails():
        if threading.current_thread().name.startswith("fnad-numba-"):
            time.sleep(0.02)
            return
        raise KeyError("from the caller")
    with pytest.raises(KeyError):
        threads.on_all_threads(caller_fails)
    assert threads.workers().busy[0] == 0      # the worker was waited for
    work, took = _shared(8)
    threads.on_all_threads(work)               # and the workers still serve
    assert sorted(took) == list(range(8))


def test_callers_on_several_threads_and_nested_calls():
    """One caller has the workers at a time; another thread's call, or a call from inside
    a task, runs its work alone: all of each call's work is done either way."""
    results = []

    def caller():
        for _ in range(100):
            work, took = _shared(4)
            inner_ok = []

            def outer():
                work()
                inner, inner_took = _shared(3)
                threads.on_all_threads(inner)          # nested
                inner_ok.append(sorted(inner_took) == [0, 1, 2])
            threads.on_all_threads(outer)
            results.append(sorted(took) == [0, 1, 2, 3] and all(inner_ok) and inner_ok)
    callers = [threading.Thread(target=caller) for _ in range(3)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert len(results) == 300 and all(results)


_PHASES = textwrap.dedent("""
    import itertools, threading, time
    from fnad.backends.numba_cpu import threads

    def calls(n):
        names = set()
        for _ in range(n):
            claim = itertools.count().__next__
            took = []
            def work():
                while (c := claim()) < 6:
                    time.sleep(0.001)
                    took.append(c)
                    names.add(threading.current_thread().name)
            threads.on_all_threads(work)
            assert sorted(took) == list(range(6))
        return len(names) > 1
    print("before: workers took part", calls(30), "rounds", threads.workers().rounds,
          "spin loop built", threads._spin_loop is not None)
    threads.start_spinning()
    took_part = calls(30)
    for _ in range(100):                  # the worker loads _spin after its next task
        if threads.workers().rounds or threads.SPIN_US <= 0:
            break
        calls(1)
        time.sleep(0.05)
    print("after: workers took part", took_part and calls(30),
          "spinning", threads.workers().rounds > 0)
""")


@needs_two
@pytest.mark.parametrize("spin_us", ["1000", "0"])
def test_workers_spin_once_compiled_code_ran_unless_turned_off(spin_us):
    """In a fresh process the workers sleep between tasks (no numba start-up beside the
    NumPy interpreter) until `start_spinning` (called after a program's first compiled
    call); with FNAD_SPIN_US=0 they never spin. They take part throughout."""
    env = dict(os.environ, FNAD_SPIN_US=spin_us)
    out = subprocess.run([sys.executable, "-c", _PHASES], env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    assert "before: workers took part True rounds 0 spin loop built False" in out, out
    assert f"after: workers took part True spinning {spin_us != '0'}" in out, out


_FIRST_COMPILED_CALL = textwrap.dedent("""
    import numpy as np
    import fnad, fnad.numpy as jnp
    from fnad.backends.numba_cpu import threads
    f = fnad.jit(lambda x: jnp.tanh(x) * 2.0, backend="numba")
    print("before", threads._spinning)
    f(np.ones(4, np.float32))
    print("after", threads._spinning)
""")


def test_the_first_compiled_call_starts_the_spinning(tmp_path):
    env = dict(os.environ, FNAD_CACHE_DIR=str(tmp_path), FNAD_BACKGROUND_COMPILE="0")
    out = subprocess.run([sys.executable, "-c", _FIRST_COMPILED_CALL], env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    assert "before False" in out and "after True" in out, out


@pytest.mark.parametrize("name,value", [("FNAD_SPIN_US", "soon"), ("FNAD_NUM_THREADS", "2.5")])
def test_a_bad_setting_says_which_and_what_it_wants(name, value):
    env = dict(os.environ, **{name: value})
    proc = subprocess.run([sys.executable, "-c", "import fnad.backends.numba_cpu.threads"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert f"{name}={value!r}: expected" in proc.stderr, proc.stderr[-2000:]


def test_the_spin_loop_runs_without_the_gil():
    """A spin that would take minutes ends as soon as another thread (which needs the GIL
    to run) changes the flag."""
    flag, result = np.zeros(1, np.int64), []
    threads._spin(flag, 1, 1)                         # built before the clock starts
    t = threading.Thread(target=lambda: result.append(threads._spin(flag, 0, 1 << 40)))
    start = time.perf_counter()
    t.start()
    time.sleep(0.05)                                  # this thread runs meanwhile
    flag[0] = 1
    t.join(timeout=30)
    assert result == [True] and time.perf_counter() - start < 30
