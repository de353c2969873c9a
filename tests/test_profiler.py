"""fnad.profiler: jax.profiler's tracing API writing Chrome trace-event files."""
import gzip
import json
import time

import pytest

import fnad
import fnad.numpy as fnp
from fnad import profiler


def _events(path):
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def test_trace_records_annotations_and_jit(tmp_path):
    @profiler.annotate_function
    def helper(x):
        time.sleep(0.002)
        return x

    with profiler.TraceAnnotation("before the trace"):      # not recorded
        pass
    with profiler.trace(tmp_path, create_perfetto_trace=True):
        for step in range(2):
            with profiler.StepTraceAnnotation("train", step_num=step, lr=0.1):
                with profiler.TraceAnnotation("inner", tag="a"):
                    time.sleep(0.003)
                helper(1)
        f = fnad.jit(lambda x: fnp.sin(x) * 2, backend="numpy")
        f(fnp.ones(3))
    runs = list((tmp_path / "plugins" / "profile").iterdir())
    assert len(runs) == 1
    traces = list(runs[0].glob("*.trace.json.gz"))
    assert len(traces) == 1 and (runs[0] / "perfetto_trace.json.gz").exists()
    ev = _events(traces[0])
    names = [e["name"] for e in ev]
    assert "before the trace" not in names
    assert names.count("train") == 2 and names.count("inner") == 2
    assert any(n.endswith("helper") for n in names)
    assert "jit trace <lambda>" in names and "jit compile (numpy)" in names
    steps = [e for e in ev if e["name"] == "train"]
    assert [s["args"]["step_num"] for s in steps] == [0, 1] and steps[0]["args"]["lr"] == 0.1
    inner = [e for e in ev if e["name"] == "inner"]
    assert all(e["dur"] >= 3000 and e["args"] == {"tag": "a"} for e in inner)
    for s, i in zip(steps, inner):           # nested spans lie inside their parents
        assert s["ts"] <= i["ts"] and i["ts"] + i["dur"] <= s["ts"] + s["dur"] + 1


def test_start_stop_errors_and_exceptions(tmp_path):
    with pytest.raises(RuntimeError, match="No profile started"):
        profiler.stop_trace()
    profiler.start_trace(tmp_path / "a")
    with pytest.raises(RuntimeError, match="already been started"):
        profiler.start_trace(tmp_path / "b")
    path = profiler.stop_trace()
    assert path.exists() and _events(path) == []
    with pytest.raises(ValueError, match="boom"):
        with profiler.trace(tmp_path / "c"):
            with profiler.TraceAnnotation("failing"):
                raise ValueError("boom")
    (written,) = (tmp_path / "c").rglob("*.trace.json.gz")
    assert [e["name"] for e in _events(written)] == ["failing"]
    with pytest.raises(TypeError, match="step_num"):
        profiler.StepTraceAnnotation("train")
    with pytest.raises(NotImplementedError, match="profiler_options"):
        profiler.start_trace(tmp_path, profiler_options=object())
    with pytest.raises(TypeError, match="name must be a string"):
        profiler.TraceAnnotation(3)
