"""The numba backend's worker threads (backends/numba_cpu/runtime.py `_Workers`,
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

from fnad.backends.numba_cpu import runtime  # noqa: E402

needs_two = pytest.mark.skipif(runtime.NUM_THREADS < 2,
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
    flag = np.zeros(1, np.int64)
    assert not runtime._spin(flag, 0, 1000)
    flag[0] = 3
    assert runtime._spin(flag, 0, 1000)
    assert not runtime._spin(flag, 3, 10)


@needs_two
def test_every_item_once_and_the_workers_take_part():
    runtime.workers()
    for _ in range(50):
        if runtime.workers().rounds or runtime.SPIN_US <= 0:
            break
        time.sleep(0.1)                        # the worker loads _spin first
    names = set()
    for _ in range(20):
        work, took = _shared(16)
        runtime.on_all_threads(work)
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
            runtime.on_all_threads(work)
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
        runtime.on_all_threads(caller_fails)
    assert runtime.workers().busy[0] == 0      # the worker was waited for
    work, took = _shared(8)
    runtime.on_all_threads(work)               # and the workers still serve
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
                runtime.on_all_threads(inner)          # nested
                inner_ok.append(sorted(inner_took) == [0, 1, 2])
            runtime.on_all_threads(outer)
            results.append(sorted(took) == [0, 1, 2, 3] and all(inner_ok) and inner_ok)
    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 300 and all(results)


_NO_SPIN = textwrap.dedent("""
    import itertools, threading, time
    from fnad.backends.numba_cpu import runtime
    assert runtime.SPIN_US == 0
    names = set()
    for _ in range(30):
        claim = itertools.count().__next__
        took = []
        def work():
            while (c := claim()) < 6:
                took.append(c)
                names.add(threading.current_thread().name)
                time.sleep(0.001)
        runtime.on_all_threads(work)
        assert sorted(took) == list(range(6))
    print("rounds", runtime.workers().rounds, "workers took part", len(names) > 1)
""")


@needs_two
def test_spinning_off():
    """FNAD_SPIN_US=0: workers sleep as soon as a task is done, and still take part."""
    env = dict(os.environ, FNAD_SPIN_US="0")
    out = subprocess.run([sys.executable, "-c", _NO_SPIN], env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    assert "rounds 0 workers took part True" in out
