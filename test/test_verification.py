"""Tests of the model checking of a batch (qrsim_ros/verification, ``qrsim verify``).

Expected values come from closed forms (a geometric loop), from numpy linear algebra on the chain the
test writes, from scipy's Wilson / t intervals, and from a small Markov-chain simulator in this file that
writes a synthetic batch directory: none from the code under test.
"""

from __future__ import annotations

import csv
import math
import re
import tempfile
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from scipy.stats import binomtest

from qrsim_ros.cli.main import main
from qrsim_ros.verification.abstraction import AbstractChain, AbstractionError, interval_vertices
from qrsim_ros.verification.compare import verify
from qrsim_ros.verification.formats import BatchFormatError, read_batch
from qrsim_ros.verification.prism import dtmc_text, mdp_text
from qrsim_ros.verification.records import ModeStatistics
from qrsim_ros.verification.storm import check

Z95 = 1.959963984540054


# --- writing batch directories ------------------------------------------------------------------------

def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def write_batch(directory: Path, episodes: list[dict[str, object]],
                transitions: dict[tuple[str, str, str], int],
                times: dict[str, list[float]]) -> Path:
    """results.csv, transitions.csv and mode_times.csv as docs/VERIFICATION.md defines them."""
    directory.mkdir(parents=True, exist_ok=True)
    header = ["episode", "seed", "outcome", "mission_time_s",
              "fault_system", "fault_actuator", "fault_grasper"]
    write_csv(directory / "results.csv", header, [[e.get(h, 0) for h in header] for e in episodes])
    write_csv(directory / "transitions.csv", ["from_mode", "to_mode", "event", "count"],
              [[a, b, ev, n] for (a, b, ev), n in sorted(transitions.items())])
    write_csv(directory / "mode_times.csv", ["mode", "visits", "total_time_s", "total_sq_time_s2"],
              [[m, len(v), repr(math.fsum(v)), repr(math.fsum(x * x for x in v))]
               for m, v in sorted(times.items())])
    return directory


def qrsim(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


# --- hand-built chains: closed forms -----------------------------------------------------------------------

def _chain(names: list[str], counts: dict[tuple[str, str], int], sojourn: dict[str, float],
           labels: dict[str, list[str]]) -> AbstractChain:
    index = {n: i for i, n in enumerate(names)}
    c = np.zeros((len(names), len(names)), dtype=np.int64)
    for (a, b), k in counts.items():
        c[index[a], index[b]] = k
    t = np.array([sojourn.get(n, 0.0) for n in names])
    return AbstractChain(tuple(names), c, t, t, t, {k: tuple(index[s] for s in v) for k, v in labels.items()})


def test_dtmc_geometric_loop_equals_the_closed_form() -> None:
    # start -> take_off -> search; search loops (r), succeeds (p) or times out (q)
    p, q, r = 7, 5, 23
    chain = _chain(["start", "take_off", "search", "end:success", "end:time_limit"],
                   {("start", "take_off"): 1, ("take_off", "search"): 1, ("search", "search"): r,
                    ("search", "end:success"): p, ("search", "end:time_limit"): q},
                   {"take_off": 4.5, "search": 12.25},
                   {"success": ["end:success"], "time_limit": ["end:time_limit"],
                    "done": ["end:success", "end:time_limit"]})
    result = check(dtmc_text(chain, "geometric loop"),
                   ['P=? [ F "success" ]', 'P=? [ F "time_limit" ]', 'R{"time"}=? [ F "done" ]'])
    assert result.exact[0] == Fraction(p, p + q)  # exact rational model checking
    assert result.exact[1] == Fraction(q, p + q)
    # visits of search: geometric with mean 1 / (1 - r/(p+q+r)) = (p+q+r)/(p+q)
    assert result.exact[2] == Fraction(9, 2) + Fraction(49, 4) * Fraction(p + q + r, p + q)
    assert result.states == 5


def test_dtmc_two_loops_equals_numpy_linear_solve() -> None:
    names = ["start", "a", "b", "c", "end:success", "end:crash"]
    counts = {("start", "a"): 10, ("start", "b"): 3, ("a", "b"): 9, ("a", "a"): 4, ("a", "end:crash"): 1,
              ("b", "c"): 6, ("b", "a"): 5, ("b", "end:crash"): 2, ("c", "end:success"): 8, ("c", "b"): 3}
    sojourn = {"a": 1.5, "b": 0.75, "c": 6.0}
    chain = _chain(names, counts, sojourn, {"success": ["end:success"], "crash": ["end:crash"],
                                            "done": ["end:success", "end:crash"]})
    result = check(dtmc_text(chain, "two loops"),
                   ['P=? [ F "success" ]', 'P=? [ F "crash" ]', 'R{"time"}=? [ F "done" ]'])
    # independent: transient block Q, absorption R, fundamental matrix N = (I - Q)^-1
    transient = ["start", "a", "b", "c"]
    P = np.zeros((6, 6))
    for (x, y), k in counts.items():
        P[names.index(x), names.index(y)] = k
    P[:4] /= P[:4].sum(axis=1, keepdims=True)
    N = np.linalg.inv(np.eye(4) - P[:4, :4])
    absorb = N @ P[:4, 4:]
    time = N @ np.array([sojourn.get(n, 0.0) for n in transient])
    assert result.values[0] == pytest.approx(absorb[0, 0], abs=1e-12)
    assert result.values[1] == pytest.approx(absorb[0, 1], abs=1e-12)
    assert result.values[2] == pytest.approx(time[0], rel=1e-12)
    assert 0.3 < result.values[0] < 0.9 and result.values[2] > 6.0  # not a trivial chain


def test_interval_vertices_of_a_three_way_split() -> None:
    vertices = interval_vertices(np.array([0.1, 0.2, 0.3]), np.array([0.5, 0.4, 0.6]))
    for v in vertices:
        assert v.sum() == pytest.approx(1.0) and np.all(v >= np.array([0.1, 0.2, 0.3]) - 1e-12) \
            and np.all(v <= np.array([0.5, 0.4, 0.6]) + 1e-12)
    # the polytope's vertices: all but one coordinate at a bound (checked by hand)
    expected = {(0.5, 0.2, 0.3), (0.3, 0.4, 0.3), (0.1, 0.4, 0.5), (0.2, 0.2, 0.6), (0.1, 0.3, 0.6)}
    assert {tuple(np.round(v, 9)) for v in vertices} == expected


# --- the interval MDP: closed-form bounds ---------------------------------------------------------------

def _loop_batch(directory: Path) -> tuple[Path, dict[str, tuple[float, float]], tuple[float, float]]:
    """40 episodes: start -> search; search loops 60 times, succeeds 25, times out 15; 100 visits of
    search lasting 1.5 or 2.5 s (mean 2). Returns the directory, scipy's Wilson intervals, t interval."""
    n_r, n_p, n_q = 60, 25, 15
    episodes = [{"episode": i, "seed": i + 1, "outcome": "success" if i < n_p else "time_limit",
                 "mission_time_s": 5.0} for i in range(n_p + n_q)]
    times = [1.5, 2.5] * 50
    counts = {("start", "search", ""): 40, ("search", "search", ""): n_r,
              ("search", "end:success", ""): n_p, ("search", "end:time_limit", ""): n_q}
    write_batch(directory, episodes, counts, {"search": times})
    wilson = {k: tuple(binomtest(n, 100).proportion_ci(0.95, "wilson")) for k, n in
              (("r", n_r), ("p", n_p), ("q", n_q))}
    t = stats.t.ppf(0.975, 99) * np.std(times, ddof=1) / 10.0
    return directory, wilson, (2.0 - t, 2.0 + t)


def test_mdp_bounds_equal_the_closed_form(tmp_path: Path) -> None:
    directory, w, (t_lo, t_hi) = _loop_batch(tmp_path / "loop")
    v = verify(read_batch(directory))
    rows = {r.name: r for r in v.rows}
    (lp, up), (lq, uq), (lr, ur) = w["p"], w["q"], w["r"]  # MDP: sound value iteration, error <= 1e-6
    # P(success) = p / (p + q): largest with p high and q low (the loop takes the rest, feasible here)
    assert lr <= 1 - up - lq <= ur and lr <= 1 - lp - uq <= ur
    assert rows["P(success)"].mdp_max == pytest.approx(up / (up + lq), rel=1e-5)
    assert rows["P(success)"].mdp_min == pytest.approx(lp / (lp + uq), rel=1e-5)
    assert rows["P(time_limit)"].mdp_max == pytest.approx(uq / (uq + lp), rel=1e-5)
    # E[T] = tau / (1 - r): extreme loop probabilities within what the other bounds allow
    r_max, r_min = min(ur, 1 - lp - lq), max(lr, 1 - up - uq)
    time = rows["E[mission time] (s)"]
    assert time.mdp_max == pytest.approx(t_hi / (1 - r_max), rel=1e-5)
    assert time.mdp_min == pytest.approx(t_lo / (1 - r_min), rel=1e-5)
    # the DTMC: the maximum-likelihood point inside
    assert rows["P(success)"].checked == pytest.approx(25 / 40, abs=1e-15)
    assert time.checked == pytest.approx(5.0, rel=1e-12)
    assert time.mdp_min < time.checked < time.mdp_max


def test_vertex_mdp_equals_storms_interval_dtmc() -> None:
    """The MDP's choices span the interval set: its Pmin / Pmax and Rmin / Rmax equal Storm's robust
    value iteration on the same intervals written as an interval DTMC (written here, bounds from scipy)."""
    names = ["start", "search", "identify", "end:success", "end:crash", "end:time_limit"]
    counts = {("start", "search"): 60, ("search", "search"): 41, ("search", "identify"): 70,
              ("search", "end:crash"): 4, ("search", "end:time_limit"): 9, ("identify", "search"): 23,
              ("identify", "end:success"): 47}
    chain = _chain(names, counts, {"search": 7.0, "identify": 2.5},
                   {"success": ["end:success"], "crash": ["end:crash"],
                    "done": ["end:success", "end:crash", "end:time_limit"]})
    lines = ["dtmc", "module m", "  s : [0..5] init 0;"]
    for i, a in enumerate(names):
        row = {names.index(b): k for (x, b), k in counts.items() if x == a}
        total = sum(row.values())
        if not row:
            lines.append(f"  [] s={i} -> [1, 1] : (s'={i});")
            continue
        cis = {j: binomtest(k, total).proportion_ci(0.95, "wilson") for j, k in row.items()}
        lines.append(f"  [] s={i} -> " + " + ".join(f"[{ci.low:.17f}, {ci.high:.17f}] : (s'={j})"
                                                    for j, ci in cis.items()) + ";")
    lines += ["endmodule", 'label "success" = s=3;', 'label "crash" = s=4;', 'label "done" = s>=3;',
              'rewards "time"', "  s=1 : 7;", "  s=2 : 2.5;", "endrewards", ""]
    import stormpy

    interval_path = Path(tempfile.mkdtemp()) / "interval.prism"
    interval_path.write_text("\n".join(lines))
    program = stormpy.parse_prism_program(str(interval_path))
    formulas = ['P=? [ F "success" ]', 'P=? [ F "crash" ]', 'R{"time"}=? [ F "done" ]']
    props = stormpy.parse_properties(";".join(formulas), program)
    model = stormpy.build_model[stormpy.Interval](program, props)
    robust = {}
    for mode in ("MINIMIZE", "MAXIMIZE"):
        resolution = getattr(stormpy.UncertaintyResolutionMode, mode)
        for f, prop in zip(formulas, props, strict=True):
            r = stormpy.model_checking(model, prop, only_initial_states=True,
                                       uncertainty_resolution_mode=resolution)
            robust[mode, f] = r.get_value(model.initial_states[0])
    mdp = check(mdp_text(chain, "vertices"), ['Pmin=? [ F "success" ]', 'Pmax=? [ F "success" ]',
                                              'Pmin=? [ F "crash" ]', 'Pmax=? [ F "crash" ]',
                                              'R{"time"}min=? [ F "done" ]', 'R{"time"}max=? [ F "done" ]'])
    expected = [robust[m, f] for f in formulas for m in ("MINIMIZE", "MAXIMIZE")]
    np.testing.assert_allclose(mdp.values, expected, rtol=1e-5)  # Storm's value iteration: 1e-6
    assert mdp.values[1] - mdp.values[0] > 0.1  # a real interval


# --- a synthetic batch from an independent Markov-chain simulator -----------------------------------------

#: mode -> [(next mode or end:<outcome>, event, probability)]; mean sojourn (s) per mode.
MISSION = {
    "take_off": [("initialise", "", 1.0)],
    "initialise": [("search", "", 0.95), ("land", "system", 0.05)],
    "search": [("identify", "", 0.55), ("return_to_base", "", 0.30), ("emergency_land", "actuator", 0.01),
               ("search", "", 0.14)],
    "identify": [("grasp", "", 0.85), ("search", "", 0.15)],
    "grasp": [("transport", "", 1.0)],
    "transport": [("drop", "", 0.90), ("reacquire", "grasper", 0.08), ("emergency_land", "actuator", 0.02)],
    "reacquire": [("grasp", "", 0.7), ("search", "", 0.3)],
    "drop": [("search", "", 0.5), ("return_to_base", "", 0.5)],
    "return_to_base": [("land", "", 1.0)],
    "land": [("end:success", "", 0.8), ("end:targets_missed", "", 0.2)],
    "emergency_land": [("end:actuator_fault", "", 1.0)],
}
SOJOURN_S = {"take_off": 3.0, "initialise": 1.0, "search": 20.0, "identify": 2.0, "grasp": 1.5,
             "transport": 8.0, "reacquire": 4.0, "drop": 1.0, "return_to_base": 10.0, "land": 5.0,
             "emergency_land": 3.0}


def simulate_batch(directory: Path, runs: int, seed: int) -> list[dict[str, object]]:
    """Run the MISSION chain ``runs`` times (exponential sojourns) and write the batch directory."""
    rng = np.random.default_rng(seed)
    transitions: Counter[tuple[str, str, str]] = Counter()
    times: defaultdict[str, list[float]] = defaultdict(list)
    episodes = []
    for i in range(runs):
        mode, clock, faults, entered_by = "take_off", 0.0, Counter[str](), ""
        transitions["start", mode, ""] += 1
        segments = []
        while True:
            dwell = float(rng.exponential(SOJOURN_S[mode]))
            times[mode].append(dwell)
            segments.append((mode, dwell, entered_by))
            clock += dwell
            options = MISSION[mode]
            nxt, event, _ = options[rng.choice(len(options), p=[o[2] for o in options])]
            transitions[mode, nxt, event] += 1
            if event:
                faults[event] = 1
            if nxt.startswith("end:"):
                break
            mode, entered_by = nxt, event
        episodes.append({"episode": i, "seed": seed + i, "outcome": nxt[4:], "mission_time_s": repr(clock),
                         "segments": segments, **{f"fault_{k}": v for k, v in faults.items()}})
    write_batch(directory, episodes, dict(transitions), dict(times))
    return episodes


def test_synthetic_batch_model_checked_inside_monte_carlo(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "batch"
    episodes = simulate_batch(directory, 3000, 7)
    n = len(episodes)
    rc, out, err = qrsim(capsys, "verify", str(directory))
    assert rc == 0, err
    assert "every model-checked value lies in its Monte Carlo interval" in out
    for name in ("abstract_dtmc.prism", "abstract_mdp.prism", "abstract.props"):
        assert (directory / name).stat().st_size > 0
    assert (directory / "abstract_dtmc.prism").read_text().count("\ndtmc\n") == 1
    # the written files are models Storm reads on their own, with the written properties
    import stormpy

    program = stormpy.parse_prism_program(str(directory / "abstract_dtmc.prism"))
    props_text = (directory / "abstract.props").read_text().split("// interval MDP")[0]
    formulas = [ln.rstrip(";") for ln in props_text.splitlines() if ln and not ln.startswith("//")]
    props = stormpy.parse_properties(";".join(formulas), program)
    model = stormpy.build_model(program, props)
    success = stormpy.model_checking(model, props[0]).get_value(model.initial_states[0])
    assert formulas[0] == 'P=? [ F "success" ]'
    assert success == pytest.approx(sum(e["outcome"] == "success" for e in episodes) / n, abs=1e-6)
    v = verify(read_batch(directory))
    rows = {r.name: r for r in v.rows}
    outcomes = Counter(str(e["outcome"]) for e in episodes)
    assert set(outcomes) == {"success", "targets_missed", "actuator_fault"}
    for outcome, k in outcomes.items():
        row = rows[f"P({outcome})"]
        lo, hi = binomtest(k, n).proportion_ci(0.95, "wilson")
        assert lo <= row.checked <= hi, (outcome, row)
        # flow conservation: the chain built from the runs reproduces their frequency exactly
        i = [r.name for r in v.rows].index(f"P({outcome})")
        assert v.dtmc_result.exact[i] == Fraction(k, n)
        assert row.mdp_min <= row.checked <= row.mdp_max
        assert row.monte_carlo.low == pytest.approx(lo, abs=1e-12)
    for event in ("system", "actuator", "grasper"):
        row = rows[f"P(fault_{event})"]
        k = sum(int(e.get(f"fault_{event}", 0)) for e in episodes)
        lo, hi = binomtest(k, n).proportion_ci(0.95, "wilson")
        assert 0 < k < n and lo <= row.checked <= hi, (event, k, row)
        assert row.mdp_min < row.checked < row.mdp_max
    mission = np.array([float(e["mission_time_s"]) for e in episodes])
    half = stats.t.ppf(0.975, n - 1) * mission.std(ddof=1) / math.sqrt(n)
    time = rows["E[mission time] (s)"]
    assert time.checked == pytest.approx(mission.mean(), rel=1e-9)
    assert mission.mean() - half <= time.checked <= mission.mean() + half
    assert (time.monte_carlo.low, time.monte_carlo.high) == pytest.approx((mission.mean() - half,
                                                                            mission.mean() + half), rel=1e-12)
    assert time.mdp_min < time.checked < time.mdp_max
    # the generating chain's own P(success), solved with numpy, lies within the MDP's bounds
    assert rows["P(success)"].mdp_min <= _true_success() <= rows["P(success)"].mdp_max


def test_a_repeated_fault_in_a_non_markov_batch_is_reported_outside(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """25 episodes drop the load 4 times, 75 never: the mode chain (drop with probability 1/2 per visit)
    says P(fault) = 1/2, the runs 1/4. The outcome and the time still agree; the table says which not."""
    episodes = [{"episode": i, "seed": i, "outcome": "success", "mission_time_s": 5.0 if i < 25 else 1.0,
                 "fault_grasper": int(i < 25)} for i in range(100)]
    counts = {("start", "carry", ""): 100, ("carry", "carry", "grasper"): 100,
              ("carry", "end:success", ""): 100}
    directory = write_batch(tmp_path / "nm", episodes, counts, {"carry": [1.0] * 200})
    rc, out, err = qrsim(capsys, "verify", str(directory))
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("P(fault_grasper)"))
    assert line.split()[1] == "0.5" and line.split()[2] == "0.25" and line.endswith("NO")
    assert "outside the Monte Carlo interval: P(fault_grasper)" in out
    assert next(ln for ln in out.splitlines() if ln.startswith("E[mission time]")).endswith("yes")


def test_mode_statistics_writes_what_the_simulator_counted(tmp_path: Path) -> None:
    episodes = simulate_batch(tmp_path / "sim", 300, 3)
    stats_ = ModeStatistics()
    for e in episodes:
        mission = stats_.add_episode(e["segments"], str(e["outcome"]))
        assert mission == pytest.approx(float(e["mission_time_s"]), rel=1e-12)
    (tmp_path / "rec").mkdir()
    stats_.write(tmp_path / "rec")

    def rows(run: str, name: str) -> list[list[str]]:
        return list(csv.reader((tmp_path / run / name).read_text().splitlines()))

    assert sorted(rows("sim", "transitions.csv")) == sorted(rows("rec", "transitions.csv"))
    sim_m = {r[0]: r for r in rows("sim", "mode_times.csv")}
    rec_m = {r[0]: r for r in rows("rec", "mode_times.csv")}
    assert sim_m.keys() == rec_m.keys() and sim_m.pop("mode") == rec_m.pop("mode")
    for mode, row in sim_m.items():
        assert rec_m[mode][1] == row[1]
        np.testing.assert_allclose([float(x) for x in rec_m[mode][2:]], [float(x) for x in row[2:]],
                                   rtol=1e-12)
    # the recorder's files with the simulator's results.csv make a consistent batch
    (tmp_path / "rec" / "results.csv").write_bytes((tmp_path / "sim" / "results.csv").read_bytes())
    assert len(read_batch(tmp_path / "rec").episodes) == 300


def _true_success() -> float:
    modes = list(MISSION)
    ends = sorted({t for opts in MISSION.values() for t, _, _ in opts if t.startswith("end:")})
    Q = np.zeros((len(modes), len(modes)))
    R = np.zeros((len(modes), len(ends)))
    for i, m in enumerate(modes):
        for t, _, p in MISSION[m]:
            if t in ends:
                R[i, ends.index(t)] += p
            else:
                Q[i, modes.index(t)] += p
    B = np.linalg.solve(np.eye(len(modes)) - Q, R)
    return float(B[modes.index("take_off"), ends.index("end:success")])


# --- bad input: one clear error --------------------------------------------------------------------------

def _good(tmp_path: Path) -> Path:
    return _loop_batch(tmp_path / "b")[0]


def _replace_line(path: Path, line: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n")


R, T, M = "results.csv", "transitions.csv", "mode_times.csv"


def _missing(d: Path) -> None:
    (d / T).unlink()


def _not_utf8(d: Path) -> None:
    (d / M).write_bytes(b"\xff\xfe")


@pytest.mark.parametrize(("corrupt", "message"), [
    (_missing, "transitions.csv: missing"),
    ((T, 3, "search,search,,many"), "transitions.csv:3: count must be a whole number >= 1, got 'many'"),
    ((T, 1, "from,to_mode,event,count"), "transitions.csv:1: header lacks from_mode"),
    ((T, 2, "search,end:success,,24"), "end:success counts 24 episodes"),
    ((T, 5, "start,end:success,,40"), "transitions.csv:5: an episode ends in no mode"),
    ((T, 4, "search,search,rotor,60"), "transitions with event rotor but"),
    ((R, 4, "2,3,success"), "results.csv:4: 3 fields, the header has 7"),
    ((R, 2, "0,1,Success!,5.0,0,0,0"), "results.csv:2: outcome must be"),
    ((R, 2, "0,1,true,5.0,0,0,0"), "results.csv:2: outcome must be a name"),
    ((R, 3, "0,1,success,5.0,0,0,0"), "results.csv:3: episode 0 appears twice"),
    ((R, 2, "0,1,success,-5,0,0,0"), "results.csv:2: mission_time_s must be a finite number >= 0"),
    ((R, 2, "0,1,success,5.0,0,2,0"), "results.csv:2: fault_actuator must be 0 or 1"),
    ((R, 2, "0,1,success,5.0,0,1,0"), "fault_actuator is 1 in 1 episodes but"),
    ((R, 2, "0,1,success,6.0,0,0,0"), "the mode times add up to 200 s"),
    ((M, 2, "search,99,200.0,425.0"), "mode search is entered 100 and left 100 times, "),
    ((M, 2, "search,100,200.0,0"), "mode_times.csv:2: mode search: total_sq_time_s2=0 is impossible for 100 "
                                   "visits totalling 200 s (it lies between total^2 / visits = 400 and "
                                   "total^2 = 40000 s^2)"),
    ((M, 2, "search,100,200.0,50000"), "mode search: total_sq_time_s2=50000 is impossible"),
    (_not_utf8, "mode_times.csv: not UTF-8 text"),
])
def test_bad_batch_is_one_error_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                corrupt: object, message: str) -> None:
    directory = _good(tmp_path)
    if callable(corrupt):
        corrupt(directory)
    else:
        name, line, text = corrupt  # type: ignore[misc]
        _replace_line(directory / name, line, text)
    with pytest.raises(BatchFormatError, match=re.escape(message)):
        read_batch(directory)
    rc, out, err = qrsim(capsys, "verify", str(directory))
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("qrsim verify: ") and message in err


def test_without_stormpy_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "stormpy", None)  # import stormpy raises ImportError
    for name in ("qrsim_ros.verification.compare", "qrsim_ros.verification.storm"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    rc, out, err = qrsim(capsys, "verify", str(_good(tmp_path)))
    assert rc == 2 and out == "" and err.count("\n") == 1 and "needs stormpy" in err


def test_too_many_successors_for_the_mdp_is_an_error() -> None:
    with pytest.raises(AbstractionError, match="13 successors"):
        interval_vertices(np.full(13, 0.01), np.full(13, 0.2))


def _many_successors_batch(directory: Path, modes: int, successors: int, episodes: int) -> Path:
    """A valid, self-consistent batch whose every mode leads to ``successors`` others (random walk)."""
    rng = np.random.default_rng(1)
    names = [f"m{i:02d}" for i in range(modes)]
    options = {m: [*rng.choice([x for x in names if x != m], successors - 1, replace=False), "end:success"]
               for m in names}
    transitions: Counter[tuple[str, str, str]] = Counter()
    times: defaultdict[str, list[float]] = defaultdict(list)
    rows = []
    for e in range(episodes):
        mode, clock = names[0], 0.0
        transitions["start", mode, ""] += 1
        while True:
            dwell = float(rng.exponential(5.0))
            times[mode].append(dwell)
            clock += dwell
            nxt = str(options[mode][rng.integers(successors)]) if rng.random() > 0.02 else "end:success"
            transitions[mode, nxt, ""] += 1
            if nxt.startswith("end:"):
                break
            mode = nxt
        rows.append({"episode": e, "seed": e, "outcome": "success", "mission_time_s": repr(clock)})
    return write_batch(directory, rows, dict(transitions), dict(times))


def test_an_mdp_too_large_for_storm_is_refused_before_it_is_built(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 40 modes of 12 successors each: Storm ran 200 s to 7.6 GB on the 1.35 million transitions
    batch = _many_successors_batch(tmp_path / "b", 40, 12, 300)
    rc, out, err = qrsim(capsys, "verify", str(batch))
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "transitions, more than the 200,000" in err and "mdp_transitions" in err and "12 successors" in err
    assert not (batch / "abstract_mdp.prism").exists()


def test_not_a_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = qrsim(capsys, "verify", str(tmp_path / "nope"))
    assert rc == 2 and out == "" and "not a directory" in err and err.count("\n") == 1
