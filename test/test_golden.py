"""Behaviour is unchanged by the refactoring: today's outputs equal the golden outputs recorded before it.

See test/golden/produce.py for what is recorded and how. CSV files (``qrsim run``, ``qrsim batch``,
``qrsim replay``) must be equal cell by cell; arrays (Simulator traces, the lockstep graph's ground
truth, sensor messages and commands) equal. The lockstep graph golden compares the ticks both runs
recorded (the recorder may stop a few ticks before the end) and requires nearly all of them.

Equal means bit-identical on a CPU like the one that recorded the goldens; on another x86-64 CPU the
last bits of floating-point results differ (numpy's SIMD transcendental functions and numba's
host-CPU code differ between AVX-512 and AVX2 machines): measured on an AMD EPYC, at most 9e-13 over
two episodes of every scenario (e.g. 4e-19 in keep_spot's estimated state, 2.8e-17 in a plume's
reference samples). So a float that is not bit-identical must agree within ``FLOAT_TOL`` relative to
max(1, |golden|) -- three orders of magnitude above those differences and far below any change of
behaviour; everything else (integers, booleans, text, which ticks exist) must be exactly equal.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import produce

#: a golden graph run (GRAPH_RUN_TIMEOUT_S) and reading its bag; the in-process files are made one per test
pytestmark = pytest.mark.timeout(300)

GOLDEN = produce.DATA_DIR
#: Share of the golden ticks (and messages) a graph run must reproduce: the recorder, stopped last,
#: may miss the final ticks of a run (up to ~10 % of an 8-s run seen under the full suite's load).
GRAPH_COVERAGE = 0.8
#: Relative tolerance (to max(1, |golden|)) for floats that are not bit-identical (see the docstring).
FLOAT_TOL = 1e-9


def _close(new: np.ndarray, golden: np.ndarray) -> bool:
    """Bit-identical, or (floats only) within ``FLOAT_TOL`` with NaNs in the same places."""
    if np.array_equal(new, golden, equal_nan=golden.dtype.kind == "f"):
        return True
    if golden.dtype.kind != "f" or new.shape != golden.shape:
        return False
    a, b = new.astype(float), golden.astype(float)
    finite = np.isfinite(b)
    if not np.array_equal(a[~finite], b[~finite], equal_nan=True):  # NaN and +-inf in the same places
        return False
    return bool(np.all(np.abs(a[finite] - b[finite]) <= FLOAT_TOL * np.maximum(1.0, np.abs(b[finite]))))


def _cell_equal(new: str, golden: str) -> bool:
    if new == golden:
        return True
    try:
        a, b = float(new), float(golden)
    except ValueError:
        return False
    return _close(np.array([a]), np.array([b]))


def _assert_csv_equal(new: bytes, golden: bytes, name: str) -> None:
    """Equal line by line and cell by cell (floats within ``FLOAT_TOL``)."""
    new_lines, golden_lines = new.decode().splitlines(), golden.decode().splitlines()
    assert len(new_lines) == len(golden_lines), f"{name}: {len(new_lines)} lines, golden {len(golden_lines)}"
    for row, (ln, lg) in enumerate(zip(new_lines, golden_lines, strict=True)):
        cn, cg = ln.split(","), lg.split(",")
        assert len(cn) == len(cg), f"{name} line {row + 1}: {len(cn)} cells, golden {len(cg)}"
        for col, (a, b) in enumerate(zip(cn, cg, strict=True)):
            assert _cell_equal(a, b), f"{name} line {row + 1} cell {col + 1}: {a!r} != golden {b!r}"


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
        if _close(a[key], b[key]):
            continue
        numeric = b[key].dtype.kind in "fiu" and b[key].size
        diff = np.nanmax(np.abs(a[key].astype(float) - b[key].astype(float))) if numeric else "?"
        raise AssertionError(f"{golden.name}[{key}]: differs (max |diff| {diff})")


def test_the_comparison_tells_cpu_rounding_from_a_change() -> None:
    golden = np.array([[1.0, -250.0, np.nan], [np.inf, 0.0, 3e-19]])
    rounding = golden.copy()
    rounding[0, 1] = np.nextafter(-250.0, 0.0) + 9e-13  # what another CPU gives
    rounding[1, 2] = 7e-19
    assert _close(rounding, golden)
    for where, value in [((0, 1), -250.0 + 1e-6), ((0, 2), 0.0), ((1, 0), 1e300), ((1, 1), 1e-8)]:
        changed = golden.copy()
        changed[where] = value
        assert not _close(changed, golden), where
    assert not _close(np.array([1, 2]), np.array([1, 3]))  # integers exactly
    _assert_csv_equal(b"step,x\n1,0.1\n", b"step,x\n1,0.10000000000000002\n", "t.csv")
    with pytest.raises(AssertionError, match="cell 2"):
        _assert_csv_equal(b"step,x\n1,0.1001\n", b"step,x\n1,0.1\n", "t.csv")
    with pytest.raises(AssertionError, match="cell 1"):
        _assert_csv_equal(b"step,x\n2,0.1\n", b"step,x\nx2,0.1\n", "t.csv")


def _produced(name: str, tmp_path: Path) -> Path:
    """Today's ``name``, produced alone into ``tmp_path`` (each file in its own test's budget)."""
    path = produce.produce_file(name, tmp_path)
    assert path.name == name and [p.name for p in tmp_path.iterdir()] == [name]
    return path


def test_every_golden_in_process_file_is_produced() -> None:
    golden = sorted(p.name for p in GOLDEN.iterdir() if not p.name.startswith("graph_"))
    assert sorted(produce.in_process_files()) == golden
    assert len(golden) >= 18 * 2 + 1  # run + trace of each scenario file, replay
    with pytest.raises(ValueError, match=r"no in-process golden file 'run_nowhere\.csv'"):
        produce.produce_file("run_nowhere.csv", GOLDEN)


@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.glob("*.csv")))
def test_csv_outputs_are_byte_identical(tmp_path: Path, name: str) -> None:
    _assert_csv_equal(_produced(name, tmp_path).read_bytes(), _golden(name).read_bytes(), name)


@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.glob("trace_*.npz")))
def test_simulator_traces_are_identical(tmp_path: Path, name: str) -> None:
    _assert_npz_equal(_produced(name, tmp_path), _golden(name))


@pytest.mark.graph
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
    assert _close(new["state"][jn], old["state"][jo]), (
        f"{case}: ground truth differs, max {np.abs(new['state'][jn] - old['state'][jo]).max():.3g}")
    assert np.array_equal(new["valid"][jn], old["valid"][jo])
    # task statuses: every one recorded in both runs is equal
    old_status = {tuple(r[:1]): r for r in old["task_status"]}
    matched = [r for r in new["task_status"] if tuple(r[:1]) in old_status]
    assert len(matched) >= GRAPH_COVERAGE * len(old["task_status"]) - 1
    for r in matched:
        expected = old_status[tuple(r[:1])]
        assert _close(r, expected), f"{case}: task status {r} != {expected}"
    # sensor messages and commands by stamp
    topics = sorted(k[len("data:"):] for k in old if k.startswith("data:"))
    assert sorted(k[len("data:"):] for k in new if k.startswith("data:")) == topics
    for topic in topics:
        so, sn = old[f"stamp:{topic}"], new[f"stamp:{topic}"]
        both = np.intersect1d(so, sn)
        assert len(both) >= GRAPH_COVERAGE * len(so) - 1, f"{case} {topic}: {len(both)} of {len(so)} messages"
        do = old[f"data:{topic}"][np.searchsorted(so, both)]
        dn = new[f"data:{topic}"][np.searchsorted(sn, both)]
        assert _close(dn, do), f"{case} {topic}: messages differ"
