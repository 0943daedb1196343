"""Tests of the batch report (qrsim_ros/batch/report.py, summary.py, figures.py) and of ``qrsim batch
--report DIR``; the progress bar's ETA (cli/run.py)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from qrsim_ros.batch import jobs
from qrsim_ros.batch.engine_local import run_in_process
from qrsim_ros.batch.report import BatchInfo, ReportPart, build_report, cell, results_csv
from qrsim_ros.batch.summary import Summary, columns_of, summarise
from qrsim_ros.cli import run
from qrsim_ros.cli.main import main
from qrsim_ros.core.common.intervals import wilson_interval
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.policies.episode import EpisodeResult


def qrsim(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def record(i: int, outcome: str, reward: float, **extra: object) -> jobs.Record:
    return {"episode": i, "seed": 10 + i, "reward": reward, "outcome": outcome, "steps": 5 + i,
            "sim_time_s": 0.1 * (5 + i), "persons_found": None, "persons_total": None, **extra}


def test_cells_and_columns() -> None:
    values = (None, True, False, 0.1, 3, "x", 1e-300)
    assert [cell(v) for v in values] == ["", "1", "0", "0.1", "3", "x", "1e-300"]
    rows = [record(0, "time_limit", 1.0, fault_gps=1), record(1, "time_limit", 2.0, mission_time_s=3.5)]
    assert columns_of(rows) == [*jobs.BASE_COLUMNS, "fault_gps", "mission_time_s"]
    text = results_csv(rows).decode()
    lines = text.splitlines()
    assert lines[0] == ",".join(columns_of(rows))
    assert lines[1].endswith(",,,1,") and lines[2].endswith(",,,,3.5")  # missing columns are empty cells
    assert text.endswith("\n") and "\r" not in text


def test_summary_counts_outcomes_and_summarises_numeric_extra_columns() -> None:
    rows = [record(i, "time_limit" if i % 3 else "invalid_vehicle", float(i), mission_time_s=2.0 * i,
                   note="n", partial=(1.0 if i else None)) for i in range(9)]
    s = summarise(rows)
    shares = {o.name: o for o in s.outcomes}
    assert list(shares)[:3] == ["time_limit", "invalid_vehicle", "all_persons_found"]
    assert [o.count for o in s.outcomes] == [6, 3, 0]
    assert shares["invalid_vehicle"].wilson95 == wilson_interval(3, 9)
    # numeric columns only; one with a None (not applicable for some episode) or text is not summarised
    assert list(s.distributions) == ["reward", "steps", "sim_time_s", "mission_time_s"]
    assert s.distributions["mission_time_s"].median == pytest.approx(8.0)
    assert s.distributions["reward"].mean == pytest.approx(4.0)


def extra_transitions(records: Sequence[jobs.Record], summary: Summary) -> ReportPart:
    """A report extra like a mission's: one more file and a section of report.md."""
    data = "episode,to\n" + "".join(f"{r['episode']},done\n" for r in records)
    return ReportPart({"transitions.csv": data.encode()}, ["## Transitions", "", f"{summary.episodes} rows"])


def test_build_report_files_and_extras() -> None:
    rows = [record(i, "time_limit", float(i)) for i in range(4)]
    info = BatchInfo("keep_spot", "auto", (10, 11, 12, 13), "dask LocalCluster", 2, 2.0)
    files = build_report(rows, info, [extra_transitions])
    # written in this order: the data, report.md, the figures last (a full disk loses figures, not data)
    assert list(files) == ["results.csv", "summary.json", "transitions.csv", "report.md", "outcomes.png",
                           "distributions.png"]
    md = files["report.md"].decode()
    assert "Engine dask LocalCluster, 2 worker(s): 2.0 s wall, 2.00 episodes/s." in md
    assert "| time_limit | 4 | 1.000 | [0.510, 1.000] |" in md
    assert "![outcomes.png](outcomes.png)" in md and md.rstrip().endswith("4 rows")
    summary = json.loads(files["summary.json"])
    assert summary["outcomes"]["time_limit"] == {"count": 4, "p": 1.0,
                                                 "wilson95": list(wilson_interval(4, 4))}
    assert summary["distributions"]["reward"]["median"] == 1.5
    # summary.json has no engine, workers or wall time: it depends on the records only
    other = build_report(rows, BatchInfo("keep_spot", "auto", (10, 11, 12, 13), "in process", 1, 9.0))
    assert other["summary.json"] == files["summary.json"] and other["results.csv"] == files["results.csv"]
    with pytest.raises(ValueError, match="rewrites"):
        build_report(rows, info, [lambda r, s: ReportPart({"results.csv": b""})])
    png = imread(io.BytesIO(files["outcomes.png"]), format="png")
    assert png.shape[0] > 300 and png.shape[1] > 600 and np.ptp(png[..., :3]) > 0.5  # drawn, not blank


def mission_columns(sim: Simulator, result: EpisodeResult) -> dict[str, object]:
    """A columns hook: what a task adds to its episodes' rows."""
    return {"final_north_m": float(sim.true_state()[0, 0]), "ended_at_step": result.steps}


def test_a_columns_hook_adds_per_episode_columns() -> None:
    sc = load_scenario("keep_spot", {"task": {"duration_steps": 5}})
    records = run_in_process(jobs.make_jobs(sc, "hover", [3, 4], mission_columns))
    assert [r["ended_at_step"] for r in records] == [5, 5]
    assert columns_of(records)[-2:] == ["final_north_m", "ended_at_step"]
    assert records[0]["final_north_m"] != records[1]["final_north_m"]
    with pytest.raises(ValueError, match="redefines base column"):
        run_in_process(jobs.make_jobs(sc, "hover", [3], lambda sim, r: {"reward": 0.0}))


def test_batch_report_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "new" / "report"
    rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "3", "--workers", "1", "--steps", "10",
                         "--seed", "4", "--report", str(out_dir), "--out", str(tmp_path / "r.csv"),
                         "--no-progress")
    assert rc == 0, err
    names = sorted(p.name for p in out_dir.iterdir())
    assert names == ["distributions.png", "outcomes.png", "report.md", "results.csv", "summary.json"]
    assert (out_dir / "results.csv").read_bytes() == (tmp_path / "r.csv").read_bytes()
    with open(out_dir / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["episode"], r["seed"], r["outcome"]) for r in rows] == [
        ("0", "4", "time_limit"), ("1", "5", "time_limit"), ("2", "6", "time_limit")]
    assert json.loads((out_dir / "summary.json").read_text())["seed_first"] == 4
    assert f"-> {out_dir}" in out and "(in process)" in out
    (tmp_path / "file").write_text("x")
    rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "2", "--report", str(tmp_path / "file"))
    assert rc == 2 and out == "" and err.count("\n") == 1 and "is not a directory" in err


def test_progress_eta() -> None:
    assert run.eta_text(0, 10, 5.0) == "ETA --:--"
    assert run.eta_text(2, 10, 5.0) == "ETA 0:20"  # 2.5 s per item, 8 left
    assert run.eta_text(1, 1000, 4.0) == "ETA 1:06:36"
    assert run.eta_text(10, 10, 75.0) == "took 1:15"
    now = [100.0]
    stream = io.StringIO()
    bar = run.ProgressBar(4, "b", stream=stream, eta=True, line_fraction=0.25, clock=lambda: now[0])
    for k in range(1, 5):
        now[0] += 3.0
        bar.update(k)
    assert stream.getvalue().splitlines() == ["b: 1/4 (25%) ETA 0:09", "b: 2/4 (50%) ETA 0:06",
                                              "b: 3/4 (75%) ETA 0:03", "b: 4/4 (100%) took 0:12"]


def test_a_disk_full_at_the_first_figure_keeps_every_data_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's files are written data first: when the disk fills up at the first PNG, results.csv,
    summary.json and report.md are there, the run says so in one line and ends with status 1."""
    from qrsim_ros.cli import CliError
    from qrsim_ros.cli import batch as batch_cli

    real = batch_cli.write_bytes_atomic
    written: list[str] = []

    def disk_fills_at_the_first_figure(path: str, data: bytes) -> None:
        if path.endswith(".png"):
            raise CliError(f"{path}: cannot write: No space left on device")
        real(path, data)
        written.append(Path(path).name)

    monkeypatch.setattr(batch_cli, "write_bytes_atomic", disk_fills_at_the_first_figure)
    out_dir = tmp_path / "report"
    rc, _, err = qrsim(capsys, "batch", "keep_spot", "--runs", "2", "--workers", "1", "--steps", "5",
                       "--seed", "4", "--report", str(out_dir), "--no-progress")
    assert rc == 1 and err.count("\n") == 1 and "No space left on device" in err
    assert written == ["results.csv", "summary.json", "report.md"]
    assert sorted(p.name for p in out_dir.iterdir()) == ["report.md", "results.csv", "summary.json"]
