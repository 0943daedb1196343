"""Tests of ``qrsim run`` and ``qrsim batch`` (qrsim_ros/cli/run.py, batch.py), run in process through
``qrsim_ros.cli.main.main`` (the subcommands as registered) with short episodes (--steps)."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest

from qrsim_ros.batch.stats import Distribution
from qrsim_ros.batch.summary import OUTCOMES
from qrsim_ros.cli import CliError, batch, run
from qrsim_ros.cli.main import main
from qrsim_ros.core.common.intervals import wilson_interval
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config import scenario
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator

REPO_CONFIG = Path(__file__).resolve().parents[1] / "config"


def qrsim(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def failing_policy_file(tmp_path: Path) -> Path:
    """``tmp_path/bad.py``: policy factories whose policies fail; ``make``'s raises KeyError('boom') at step 3
    (step_count 2), ``wrong_shape``'s answers with rows of the wrong shape (2, 3) for one vehicle."""
    path = tmp_path / "bad.py"
    path.write_text(
        "def make(view):\n"
        "    def policy(v):\n"
        "        if v.step_count == 2:\n"
        "            raise KeyError('boom')\n"
        "        return [[0.0, 0.0, 0.0]]\n"
        "    return policy\n"
        "def wrong_shape(view):\n"
        "    return lambda v: [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]\n")
    return path


# --- qrsim run ------------------------------------------------------------------------------------

def test_run_hover_keep_spot_prints_the_outcome(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = qrsim(capsys, "run", "keep_spot", "--steps", "50", "--policy", "hover", "--seed", "3")
    assert rc == 0, err
    assert "outcome: time_limit after 50 steps" in out
    assert re.search(r"^reward: -?\d", out, re.M)
    assert "seed 3" in out
    assert re.search(r"time: 1\.00 s simulated in \S+ s wall \(real-time factor \S+x\)", out)  # 50 x 20 ms
    assert "persons found" not in out  # not a search-and-rescue task
    assert "qrsim run: 50/50 (100%)" in err  # stderr is not a terminal: progress lines


def test_run_out_csv_has_one_row_per_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_csv = tmp_path / "episode.csv"
    rc, out, err = qrsim(capsys, "run", "keep_spot_x10", "--steps", "30", "--policy", "hover", "--seed", "2",
                         "--out", str(out_csv), "--no-progress")
    assert rc == 0, err
    assert err == ""  # --no-progress
    header, rows = read_csv(out_csv)
    assert header[:4] == ["step", "t", "reward", "cumulative_reward"]
    assert header[4:8] == ["px_0", "py_0", "pz_0", "valid_0"] and len(header) == 4 + 4 * 10
    assert len(rows) == 30
    data = np.array(rows, float)
    np.testing.assert_array_equal(data[:, 0], np.arange(1, 31))
    np.testing.assert_allclose(data[:, 1], 0.02 * np.arange(1, 31), rtol=0, atol=1e-12)
    np.testing.assert_allclose(data[:, 3], np.cumsum(data[:, 2]), rtol=1e-12, atol=1e-12)
    reward = float(re.search(r"^reward: (\S+)", out, re.M).group(1))
    assert reward == pytest.approx(data[-1, 3], rel=1e-5)
    # keep_spot_x10 places vehicle i at north -100 + 20 (i + 1) (spec 5.2); hovering keeps them near
    north = data[-1, 4::4]
    np.testing.assert_allclose(north, -100.0 + 20.0 * np.arange(1, 11), atol=1.0)
    assert np.all(data[:, 7::4] == 1)


def test_run_with_the_same_seed_is_reproducible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [tmp_path / f"{k}.csv" for k in ("a", "b", "c")]
    for path, seed in zip(paths, ("4", "4", "5"), strict=True):
        rc, _, err = qrsim(capsys, "run", "cats_mouse_1b", "--steps", "5", "--seed", seed, "--out", str(path),
                           "--no-progress")
        assert rc == 0, err
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()


@pytest.mark.parametrize(("args", "message"), [
    (["no_such_scenario"], "unknown scenario 'no_such_scenario'"),
    (["keep_spot", "--policy", "teleport"], "unknown policy 'teleport'"),
    (["keep_spot", "--policy", "no_such_module_xyz:make"], "no module named 'no_such_module_xyz'"),
    (["keep_spot", "--policy", "qrsim_ros.policies:no_such_factory"], "has no attribute"),
    (["keep_spot", "--set", "task.duration_steps=many"], "task.duration_steps: expected an integer"),
    (["keep_spot", "--set", "novalue"], "expected KEY=VALUE"),
    (["keep_spot", "--steps", "0"], "--steps must be >= 1"),
    (["keep_spot", "--out", "/no/such/dir/x.csv"], "does not exist"),
])
def test_run_bad_input_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                             message: str) -> None:
    rc, out, err = qrsim(capsys, "run", *args)
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("qrsim run: ") and message in err


def test_run_set_overrides_reach_the_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = qrsim(capsys, "run", "keep_spot", "--set", "task.duration_steps=7", "--no-progress")
    assert rc == 0, err
    assert "after 7 steps" in out
    assert run.parse_overrides(["a.b=1", "a.c=[1, 2]", "d=true", "e=on"]) == {
        "a": {"b": 1, "c": [1, 2]}, "d": True, "e": "on"}  # YAML 1.2: 'on' stays a string


def test_run_list_shows_the_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = qrsim(capsys, "run", "--list")
    assert rc == 0
    assert {"keep_spot", "search_rescue_2a", "cats_mouse_1a", "plume_3a"} <= set(out.split())


def test_run_user_policy_from_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a user policy: fly north at 1 m/s; a cat starts 14-20 m from the mouse, so 5 s moves it ~5 m north
    (tmp_path / "north.py").write_text(
        "import numpy as np\n"
        "def make(view):\n"
        "    rows = len(view.action_spec['vehicles'])\n"
        "    return lambda v: np.tile([1.0, 0.0], (rows, 1))\n")
    out_csv = tmp_path / "ep.csv"
    rc, _, err = qrsim(capsys, "run", "cats_mouse_1a", "--steps", "5", "--seed", "1", "--policy",
                       f"{tmp_path / 'north.py'}:make", "--out", str(out_csv), "--no-progress")
    assert rc == 0, err
    _, rows = read_csv(out_csv)
    data = np.array(rows, float)
    assert np.all(np.diff(data[:, 4]) > 0)  # cat 0 moves north every step


@pytest.mark.parametrize("seed", [3, 7])
def test_search_pattern_finds_persons_in_2a(capsys: pytest.CaptureFixture[str], seed: int) -> None:
    rc, out, err = qrsim(capsys, "run", "search_rescue_2a", "--seed", str(seed), "--policy", "search-pattern",
                         "--no-progress")
    assert rc == 0, err
    found, total = map(int, re.search(r"^persons found: (\d+)/(\d+)", out, re.M).groups())
    assert 5 <= total <= 10
    assert found >= 1


def test_progress_bar_on_a_terminal_redraws_in_place() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = run.ProgressBar(4, "x", stream=stream)
    for k in range(1, 5):
        bar.update(k)
    bar.close()
    text = stream.getvalue()
    assert text.startswith("\rx [") and "4/4" in text and text.endswith("\n")
    assert text.count("\n") == 1  # redrawn with \r, one newline at the end
    plain = io.StringIO()
    bar = run.ProgressBar(20, "y", stream=plain)
    for k in range(1, 21):
        bar.update(k)
    assert plain.getvalue().splitlines() == [f"y: {k}/20 ({5 * k}%) " for k in range(2, 21, 2)]


# --- qrsim batch ----------------------------------------------------------------------------------

def test_batch_results_do_not_depend_on_the_workers(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    outs = {w: tmp_path / f"w{w}.csv" for w in (1, 2)}
    for w, path in outs.items():
        rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "4", "--workers", str(w), "--steps",
                             "40", "--seed", "5", "--out", str(path), "--no-progress")
        assert rc == 0, err
        assert f"4 episodes (seeds 5..8) on {w} worker(s)" in out
    assert outs[1].read_bytes() == outs[2].read_bytes()
    header, rows = read_csv(outs[1])
    assert header == list(batch.RESULTS_HEADER)
    assert [r[0] for r in rows] == ["0", "1", "2", "3"] and [r[1] for r in rows] == ["5", "6", "7", "8"]
    assert all(r[3] == "time_limit" and r[4] == "40" and float(r[5]) == pytest.approx(0.8) for r in rows)
    assert len({r[2] for r in rows}) == 4  # different seeds, different rewards
    assert all(r[6] == "" and r[7] == "" for r in rows)  # not search and rescue
    # each row is the episode `qrsim run` flies with that seed
    rc, out, _ = qrsim(capsys, "run", "keep_spot", "--steps", "40", "--seed", "7", "--no-progress")
    reward = float(re.search(r"^reward: (\S+)", out, re.M).group(1))  # printed with 6 digits
    assert reward == pytest.approx(float(rows[2][2]), rel=1e-5)


def test_batch_prints_outcome_probabilities_and_distributions(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # random velocity commands 2 m above the ground for 4 s: episodes end by crashing or time out; the
    # printed table must agree with the per-episode rows of results.csv whatever the mix
    path = tmp_path / "r.csv"
    rc, out, err = qrsim(capsys, "batch", "search_rescue_2a", "--runs", "4", "--workers", "1", "--steps", "4",
                         "--policy", "random", "--set", "task.start_z_ned_m=-2.0", "--out", str(path),
                         "--no-progress")
    assert rc == 0, err
    _, rows = read_csv(path)
    lines = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.strip()}
    for name in OUTCOMES:
        k = sum(r[3] == name for r in rows)
        lo, hi = wilson_interval(k, 4)
        assert lines[name][1:] == [str(k), f"{k / 4:.3f}", f"[{lo:.3f},", f"{hi:.3f}]"]
    rewards = np.array([float(r[2]) for r in rows])
    stats = [float(v) for v in lines["reward"][1:]]  # mean std min q1 median q3 max
    expected = [rewards.mean(), rewards.std(ddof=1), rewards.min(), *np.percentile(rewards, [25, 50, 75]),
                rewards.max()]
    np.testing.assert_allclose(stats, expected, rtol=1e-5, atol=1e-9)  # printed with 6 significant digits
    assert "persons" in lines and lines["duration"][0] == "duration"


@pytest.mark.parametrize(("args", "message"), [
    (["keep_spot"], "--runs R is required"),
    (["keep_spot", "--runs", "2", "--seed", "0"], "--seed must be >= 1"),
    (["keep_spot", "--runs", "2", "--workers", "0"], "--workers must be >= 1"),
    (["keep_spot", "--runs", "2", "--policy", "nope"], "unknown policy"),
    (["nope", "--runs", "2"], "unknown scenario"),
])
def test_batch_bad_input_exits_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    rc, out, err = qrsim(capsys, "batch", *args)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and message in err


def test_episode_seeds_never_use_the_clock() -> None:
    assert batch.episode_seeds(1, 4) == [1, 2, 3, 4]
    assert batch.episode_seeds(10, 2) == [10, 11]
    with pytest.raises(CliError):
        batch.episode_seeds(0, 3)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (10, 10), (5, 10), (3, 50), (1, 1), (37, 120)])
def test_wilson_interval(k: int, n: int) -> None:
    lo, hi = wilson_interval(k, n)
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert lo == pytest.approx(ref.low, abs=1e-12) and hi == pytest.approx(ref.high, abs=1e-12)
    z2 = 1.959963984540054**2
    if k == 0:  # closed forms at the ends: [0, z^2 / (n + z^2)] and [n / (n + z^2), 1]
        assert (lo, hi) == (0.0, pytest.approx(z2 / (n + z2)))
    if k == n:
        assert (lo, hi) == (pytest.approx(n / (n + z2)), 1.0)


def test_distribution_summary() -> None:
    d = Distribution.of([4.0, 1.0, 3.0, 2.0])
    assert (d.mean, d.min, d.max, d.median) == (2.5, 1.0, 4.0, 2.5)
    assert d.std == pytest.approx(math.sqrt(5.0 / 3.0))  # sample std of 1..4
    assert (d.q1, d.q3) == (1.75, 3.25)  # linear interpolation
    assert Distribution.of([7.0]).std == 0.0


def test_scenarios_exist_for_the_tests() -> None:
    for name in ("keep_spot", "keep_spot_x10", "cats_mouse_1a", "cats_mouse_1b", "search_rescue_2a"):
        assert load_scenario(name).name == name


def test_run_failing_policy_exits_1_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = failing_policy_file(tmp_path)
    rc, _, err = qrsim(capsys, "run", "search_rescue_2a", "--steps", "5", "--policy", f"{bad}:make",
                       "--no-progress")
    assert rc == 1
    assert err.count("\n") == 1 and "failed at step 3: KeyError: 'boom'" in err
    rc, _, err = qrsim(capsys, "run", "search_rescue_2a", "--steps", "5", "--policy", f"{bad}:wrong_shape",
                       "--no-progress")
    assert rc == 1
    assert err.count("\n") == 1 and "step 1:" in err and "shape (2, 3)" in err


# --- the seed convention (core.config.scenario: -1 the file's, 0 the clock, >= 1 that seed) --------------

def scenario_with_seed(tmp_path: Path, name: str, seed: int) -> Path:
    """config/NAME.yaml with its ``seed: 0`` replaced (every shipped file says 0: from the clock)."""
    text = (REPO_CONFIG / f"{name}.yaml").read_text()
    assert "\nseed: 0\n" in text
    path = tmp_path / f"{name}_seed{seed}.yaml"
    path.write_text(text.replace("\nseed: 0\n", f"\nseed: {seed}\n"))
    return path


def test_resolve_seed_and_check_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (scenario.SEED_FROM_FILE, scenario.SEED_FROM_CLOCK, scenario.MAX_SEED) == (-1, 0, 2**31 - 1)
    assert scenario.resolve_seed(-1, 5) == scenario.resolve_seed(None, 5) == 5
    assert scenario.resolve_seed(7, 5) == 7
    assert scenario.resolve_seed(scenario.MAX_SEED, 0) == scenario.MAX_SEED
    drawn = {scenario.resolve_seed(0, 5) for _ in range(20)}
    drawn |= {scenario.resolve_seed(-1, 0) for _ in range(20)}
    assert all(isinstance(s, int) and 1 <= s <= scenario.MAX_SEED for s in drawn) and len(drawn) > 30
    monkeypatch.setattr(scenario, "clock_seed", lambda: 77)
    assert scenario.resolve_seed(0, 5) == scenario.resolve_seed(-1, 0) == scenario.resolve_seed(None, 0) == 77
    for bad in (-2, scenario.MAX_SEED + 1, True, 1.5, "3", None):
        with pytest.raises(ConfigError, match=r"must be an integer in \[-1, 2147483647\]"):
            scenario.check_seed(bad, "--seed")
    with pytest.raises(ConfigError, match=r"^seed=-2 must be an integer in \[-1, 2147483647\] \(-1: the "
                       r"scenario file's seed; 0: from the clock; 1\.\.2147483647: that seed\)$"):
        scenario.resolve_seed(-2, 5)
    assert [scenario.check_seed(v) for v in (-1, 0, 1, np.int64(3))] == [-1, 0, 1, 3]


def test_a_simulator_built_with_a_seed_flies_the_episode_of_reset_with_that_seed() -> None:
    # what `qrsim run` relies on to build once: Simulator(seed s) == Simulator(...) + reset(seed=s)
    sc = load_scenario("search_rescue_2b", {"task": {"duration_steps": 30}})
    built = Simulator(replace(sc, seed=11))
    reseeded = Simulator(replace(sc, seed=3))
    reseeded.reset(seed=11)
    other = Simulator(replace(sc, seed=3))
    other.reset()  # continues seed 3's streams: a different episode
    actions = np.tile([1.0, 0.5, 0.0], (sc.num_vehicles, 1))
    rows = {}
    for key, sim in (("built", built), ("reseeded", reseeded), ("other", other)):
        assert sim.step_count == 0
        states = []
        while not sim.done:
            sim.step(actions)
            states.append(np.concatenate([sim.true_state().ravel(), sim.estimated_state().ravel()]))
        rows[key] = (np.array(states), sim.total_reward, sim.seed_entropy)
    np.testing.assert_array_equal(rows["built"][0], rows["reseeded"][0])
    assert rows["built"][1:] == rows["reseeded"][1:] == (rows["built"][1], 11)
    assert not np.array_equal(rows["built"][0], rows["other"][0])


def count_loads_and_builds(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts = {"yaml": 0, "build": 0, "reset": 0}
    load_yaml, build, reset = scenario.load_yaml, Simulator._build, Simulator.reset

    def counting(key: str, f: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            counts[key] += 1
            return f(*a, **k)
        return wrapper

    monkeypatch.setattr(scenario, "load_yaml", counting("yaml", load_yaml))
    monkeypatch.setattr(Simulator, "_build", counting("build", build))
    monkeypatch.setattr(Simulator, "reset", counting("reset", reset))
    return counts


@pytest.mark.parametrize("seed_args", [[], ["--seed", "-1"], ["--seed", "0"], ["--seed", "4"]])
def test_run_reads_the_yaml_once_and_builds_once(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 seed_args: list[str]) -> None:
    counts = count_loads_and_builds(monkeypatch)
    rc, _, err = qrsim(capsys, "run", "keep_spot", "--steps", "3", *seed_args, "--no-progress")
    assert rc == 0, err
    assert counts == {"yaml": 1, "build": 1, "reset": 1}  # the reset is the constructor's


def test_batch_reads_the_yaml_once_and_builds_once_per_episode(capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    counts = count_loads_and_builds(monkeypatch)
    rc, _, err = qrsim(capsys, "batch", "keep_spot", "--runs", "3", "--workers", "1", "--steps", "3",
                       "--no-progress")
    assert rc == 0, err
    assert counts == {"yaml": 1, "build": 3, "reset": 3}


def test_run_seed_minus_one_is_the_files_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    five = scenario_with_seed(tmp_path, "cats_mouse_1b", 5)
    outs = {}
    for key, args in (("default", []), ("minus_one", ["--seed", "-1"]), ("five", ["--seed", "5"]),
                      ("six", ["--seed", "6"])):
        outs[key] = tmp_path / f"{key}.csv"
        rc, out, err = qrsim(capsys, "run", str(five), "--steps", "5", *args, "--out", str(outs[key]),
                             "--no-progress")
        assert rc == 0, err
        assert f"seed {6 if key == 'six' else 5}\n" in out
    data = {k: v.read_bytes() for k, v in outs.items()}
    assert data["default"] == data["minus_one"] == data["five"] != data["six"]
    # the shipped file (seed 0) under the same name flies the same episode with --seed 5
    same = tmp_path / "shipped.csv"
    rc, _, err = qrsim(capsys, "run", "cats_mouse_1b", "--steps", "5", "--seed", "5", "--out", str(same),
                       "--no-progress")
    assert rc == 0, err
    assert same.read_bytes() == data["five"]


@pytest.mark.parametrize("seed_args", [["--seed", "0"], [], ["--seed", "-1"]])
def test_run_clock_seed_is_drawn_once_printed_and_repeatable(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             seed_args: list[str]) -> None:
    # --seed 0, and -1 with the shipped file's seed 0: a seed from the clock, printed; --seed SEED repeats it
    first, again = tmp_path / "first.csv", tmp_path / "again.csv"
    rc, out, err = qrsim(capsys, "run", "keep_spot", "--steps", "5", *seed_args, "--out", str(first),
                         "--no-progress")
    assert rc == 0, err
    seed = int(re.search(r"^scenario keep_spot, policy auto, seed (\d+)$", out, re.M).group(1))
    assert 1 <= seed <= scenario.MAX_SEED
    rc, out, err = qrsim(capsys, "run", "keep_spot", "--steps", "5", "--seed", str(seed), "--out", str(again),
                         "--no-progress")
    assert rc == 0, err
    assert f"seed {seed}\n" in out and first.read_bytes() == again.read_bytes()


@pytest.mark.parametrize("command", ["run", "batch"])
@pytest.mark.parametrize("value", ["-2", "2147483648", "x", "1.5"])
def test_bad_seed_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], command: str, value: str) -> None:
    try:
        runs = ["--runs", "2"] if command == "batch" else []
        rc, out, err = qrsim(capsys, command, "keep_spot", *runs, "--steps", "3", f"--seed={value}")
    except SystemExit as exc:  # not an integer: argparse's usage error (one line, status 2)
        rc, (out, err) = int(exc.code or 0), capsys.readouterr()
        assert f"argument --seed: invalid int value: '{value}'" in err
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"qrsim {command}: ") and "--seed" in err
    if value in ("-2", "2147483648"):
        assert f"--seed={value} must be an integer in [-1, 2147483647] (-1: the scenario file's seed; " \
               "0: from the clock; 1..2147483647: that seed)" in err


def test_batch_seed_convention(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    five = scenario_with_seed(tmp_path, "keep_spot", 5)
    cases = [
        (["keep_spot"], "seeds 1..3"),  # default -1, the shipped file's seed is 0 (clock): BASE 1
        (["keep_spot", "--seed", "-1"], "seeds 1..3"),
        ([str(five)], "seeds 5..7"),  # default -1: the file's seed 5
        ([str(five), "--seed", "-1"], "seeds 5..7"),
        ([str(five), "--seed", "9"], "seeds 9..11"),
        (["keep_spot", "--seed", "2147483645"], "seeds 2147483645..2147483647"),
    ]
    for args, seeds in cases:
        rc, out, err = qrsim(capsys, "batch", *args, "--runs", "3", "--workers", "1", "--steps", "2",
                             "--no-progress")
        assert rc == 0, err
        assert f"3 episodes ({seeds}) on 1 worker(s)" in out, (args, out)


@pytest.mark.parametrize(("args", "message"), [
    (["--seed", "0"], "--seed must be >= 1 or -1 (the scenario file's seed), got 0: no batch episode is "
                      "clock-seeded (episode i gets BASE + i)"),
    (["--seed", "2147483646"], "the last episode's seed BASE + R - 1 = 2147483646 + 3 - 1 = 2147483648 "
                               "exceeds the largest seed 2147483647"),
])
def test_batch_bad_seed_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                              message: str) -> None:
    rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "3", *args)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("qrsim batch: ") and message in err


def test_batch_resolve_base_seed() -> None:
    assert batch.resolve_base_seed(-1, 0) == batch.DEFAULT_BASE_SEED == 1
    assert batch.resolve_base_seed(-1, 8) == 8 and batch.resolve_base_seed(3, 8) == 3
    with pytest.raises(CliError, match="no batch episode is clock-seeded"):
        batch.resolve_base_seed(0, 8)


# --- one error type ---------------------------------------------------------------------------------

def test_every_subcommand_uses_the_one_cli_error() -> None:
    import argparse
    import importlib
    import inspect

    from qrsim_ros import cli
    from qrsim_ros.cli import main as cli_main

    parser = cli_main.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == {"batch", "demo", "launch", "play", "plot", "replay", "run", "verify"}
    for module in [cli_main, *(importlib.import_module(f"qrsim_ros.cli.{name}") for name in sub.choices)]:
        own = [name for name, obj in vars(module).items()
               if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == module.__name__]
        assert own == [], f"{module.__name__} defines its own error class(es) {own}"
        assert getattr(module, "CliError", cli.CliError) is cli.CliError
    assert issubclass(cli.CliError, ValueError)
