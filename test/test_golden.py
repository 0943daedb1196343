"""Behaviour is unchanged by the refactoring: today's outputs equal the golden outputs recorded before it.

See test/golden/produce.py for what is recorded and how. CSV files (``qrsim run``, ``qrsim batch``,
``qrsim replay``) must be byte-identical; arrays (Simulator traces, the lockstep graph's ground truth,
sensor messages and commands) exactly equal. The lockstep graph golden compares the ticks both runs
recorded (the recorder may stop a few ticks before the end) and requires nearly all of them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import produce

GOLDEN = produce.DATA_DIR
#: Share of the golden ticks (and messages) a graph run must reproduce: the recorder, stopped last,
#: may miss the final ticks of a run (up to ~10 % of an 8-s run seen under the full suite's load).
GRAPH_COVERAGE = 0.8


def _golden(name: str) -> Path:
    path = GOLDEN / name
    assert path.is_file(), f"golden file {path} is missing"
    return path


def _assert_npz_equal(new: Path | dict[str, np.ndarray], golden: Path) -> None:
    a = dict(np.load(new)) if isinstance(new, Path) else new
    b = dict(np.load(golden))
    assert sorted(a) == sorted(b), f"{golden.name}: keys differ"
    for key in b:
        assert a[key].shape == b[key].shape, f"{golden.name}[{key}]: shape {a[key].shape} != {b[key].shape}"
        if np.array_equal(a[key], b[key], equal_nan=b[key].dtype.kind == "f"):
            continue
        numeric = b[key].dtype.kind in "fiu" and b[key].size
        diff = np.nanmax(np.abs(a[key].astype(float) - b[key].astype(float))) if numeric else "?"
        raise AssertionError(f"{golden.name}[{key}]: differs (max |diff| {diff})")


@pytest.fixture(scope="module")
def in_process_outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("golden_in_process")
    produce.produce_in_process(out)
    return out


@pytest.mark.slow
def test_every_golden_in_process_file_is_produced(in_process_outputs: Path) -> None:
    golden = sorted(p.name for p in GOLDEN.iterdir() if not p.name.startswith("graph_"))
    produced = sorted(p.name for p in in_process_outputs.iterdir())
    assert produced == golden
    assert len(golden) >= 18 * 2 + 1  # run + trace of each scenario file, replay


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.glob("*.csv")))
def test_csv_outputs_are_byte_identical(in_process_outputs: Path, name: str) -> None:
    new = (in_process_outputs / name).read_bytes()
    assert new == _golden(name).read_bytes(), f"{name} differs from its golden output"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.glob("trace_*.npz")))
def test_simulator_traces_are_identical(in_process_outputs: Path, name: str) -> None:
    _assert_npz_equal(in_process_outputs / name, _golden(name))


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(produce.GRAPH_CASES))
def test_lockstep_graph_matches_golden(tmp_path: Path, case: str) -> None:
    from rosenv import free_domain, require_ros

    require_ros()
    new = produce.graph_run(case, tmp_path, free_domain())
    old = dict(np.load(_golden(f"graph_{case}.npz")))
    # ground truth by (episode, tick)
    new_keys = {tuple(k): j for j, k in enumerate(new["episode_tick"])}
    common = [(j, new_keys[tuple(k)]) for j, k in enumerate(old["episode_tick"]) if tuple(k) in new_keys]
    assert len(common) >= GRAPH_COVERAGE * len(old["episode_tick"]), (
        f"{case}: only {len(common)} of {len(old['episode_tick'])} golden ticks recorded")
    jo, jn = (np.array(c) for c in zip(*common, strict=True))
    assert np.array_equal(new["state"][jn], old["state"][jo]), (
        f"{case}: ground truth differs, max {np.abs(new['state'][jn] - old['state'][jo]).max():.3g}")
    assert np.array_equal(new["valid"][jn], old["valid"][jo])
    # task statuses: every one recorded in both runs is equal
    old_status = {tuple(r[:1]): r for r in old["task_status"]}
    matched = [r for r in new["task_status"] if tuple(r[:1]) in old_status]
    assert len(matched) >= GRAPH_COVERAGE * len(old["task_status"]) - 1
    for r in matched:
        expected = old_status[tuple(r[:1])]
        assert np.array_equal(r, expected), f"{case}: task status {r} != {expected}"
    # sensor messages and commands by stamp
    topics = sorted(k[len("data:"):] for k in old if k.startswith("data:"))
    assert sorted(k[len("data:"):] for k in new if k.startswith("data:")) == topics
    for topic in topics:
        so, sn = old[f"stamp:{topic}"], new[f"stamp:{topic}"]
        both = np.intersect1d(so, sn)
        assert len(both) >= GRAPH_COVERAGE * len(so) - 1, f"{case} {topic}: {len(both)} of {len(so)} messages"
        do = old[f"data:{topic}"][np.searchsorted(so, both)]
        dn = new[f"data:{topic}"][np.searchsorted(sn, both)]
        assert np.array_equal(do, dn, equal_nan=True), f"{case} {topic}: messages differ"
