"""Tests of qrsim_ros.core.sensors.gps_orbits: GPS time, the SP3 reader/interpolator and the nominal
constellation.

Spec 3.2 (orbits, parseTime), 9 (GPS time). Expected values come from the spec, from the text of the
SP3 file itself, or from orbital mechanics (Kepler/Newton) written out here.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from scipy.interpolate import BarycentricInterpolator

from qrsim_ros.core.common import geodesy
from qrsim_ros.core.sensors.gps import Sp3Orbits as Sp3OrbitsFromGps
from qrsim_ros.core.sensors.gps_orbits import (
    NOMINAL_RADIUS_M,
    QRSIM_DEFAULT_SVS,
    NominalConstellation,
    OrbitTimeError,
    Sp3Error,
    Sp3Orbits,
    elevation_deg,
    gps_seconds,
    gps_seconds_from_utc,
    gps_seconds_from_week,
    gps_week_sow,
    leap_seconds_at,
    local_up_ecef,
    read_sp3,
)

SP3_NAME = "ngs15992_16to17.sp3"
MU_M3S2 = 3.986004418e14  # WGS-84 gravitational parameter
OMEGA_E = 7.2921151467e-5  # WGS-84 Earth rotation rate [rad/s]
SIDEREAL_DAY_S = 2.0 * math.pi / OMEGA_E
ORIGIN_LLA = (51.71190, -0.21052, 0.0)  # QRSim's site


@pytest.fixture(scope="module")
def sp3_path(qrsim_data_dir: Path) -> Path:
    return qrsim_data_dir / SP3_NAME


@pytest.fixture(scope="module")
def sp3(sp3_path: Path) -> Sp3Orbits:
    return Sp3Orbits(sp3_path)


def to_inertial(ecef: np.ndarray, t_s: float) -> np.ndarray:
    """Rotate ECEF positions into a frame that does not rotate with the Earth (angle OMEGA_E t)."""
    c, s = math.cos(OMEGA_E * t_s), math.sin(OMEGA_E * t_s)
    return ecef @ np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])


# --- GPS time ---------------------------------------------------------------------------------------

def test_gps_time_spec_values() -> None:
    assert gps_seconds(1980, 1, 6) == 0.0
    t = gps_seconds(2010, 8, 31, 16, 0, 0)
    assert t == 967305600.0  # spec 3.2: parseTime(2010,8,31,16,0,0)
    assert gps_week_sow(t) == (1599, 230400.0)
    assert gps_seconds_from_week(1599, 230400.0) == t
    # the SP3 file's first epoch, 15:00 GPS the same day
    assert gps_week_sow(gps_seconds(2010, 8, 31, 15)) == (1599, 226800.0)
    assert gps_seconds(2010, 8, 31, 15, 30, 12.5) - gps_seconds(2010, 8, 31, 15) == 1812.5


def test_gps_time_from_utc_adds_leap_seconds() -> None:
    assert leap_seconds_at(datetime(1981, 6, 30, 23, 59)) == 0
    assert leap_seconds_at(datetime(1993, 7, 1)) == 9
    assert leap_seconds_at(datetime(2010, 8, 31)) == 15
    assert leap_seconds_at(datetime(2024, 1, 1)) == 18
    assert gps_seconds_from_utc(datetime(2017, 1, 1)) - gps_seconds(2017, 1, 1) == 18.0
    aware = datetime(2017, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))  # = 2017-01-01 00:00 UTC
    assert gps_seconds_from_utc(aware) == gps_seconds_from_utc(datetime(2017, 1, 1, tzinfo=UTC))


# --- SP3 reader ---------------------------------------------------------------------------------------

def test_sp3_file_content(sp3: Sp3Orbits) -> None:
    d = sp3.data
    # The header announces 96 epochs (a whole day) but the file holds 15:00..19:45, 20 epochs of 900 s.
    assert d.header_num_epochs == 96
    assert d.epochs_s.size == 20
    assert d.header_interval_s == 900.0
    np.testing.assert_array_equal(np.diff(d.epochs_s), 900.0)
    assert d.epochs_s[0] == gps_seconds(2010, 8, 31, 15) == 967302000.0
    assert d.prns == tuple(range(2, 33))  # 31 GPS satellites, PRN 1 absent
    assert np.all(np.isfinite(d.positions_m))
    # first record of the file: "P  2 -15730.536190  13454.671933  16370.778232" km
    np.testing.assert_allclose(d.positions_m[0, 0], [-15730536.190, 13454671.933, 16370778.232], atol=1e-6)
    # last record: "P 32  25041.843575  -7299.516092  -3511.840529"
    np.testing.assert_allclose(d.positions_m[-1, -1], [25041843.575, -7299516.092, -3511840.529], atol=1e-6)
    r = np.linalg.norm(d.positions_m, axis=-1)
    assert abs(r.mean() - 26_560e3) < 50e3  # GPS semi-major axis ~26,560 km
    assert r.min() > 25_900e3 and r.max() < 27_200e3  # eccentricity < 0.025


def test_sp3_valid_span_and_defaults(sp3: Sp3Orbits) -> None:
    # one 7200 s interval fits in 15:00..19:45: starts at 16:00, valid until 18:00 (spec 3.2 algorithm)
    assert sp3.valid_span_s == (gps_seconds(2010, 8, 31, 16), gps_seconds(2010, 8, 31, 18))
    assert sp3.default_start_window_s == (gps_seconds(2010, 8, 31, 16), gps_seconds(2010, 8, 31, 17, 30))
    assert sp3.default_svs == QRSIM_DEFAULT_SVS
    assert Sp3OrbitsFromGps is Sp3Orbits  # public name qrsim_ros.core.sensors.gps.Sp3Orbits


def test_sp3_reproduces_tabulated_samples(sp3: Sp3Orbits) -> None:
    d = sp3.data
    inside = np.flatnonzero((d.epochs_s >= sp3.valid_span_s[0]) & (d.epochs_s <= sp3.valid_span_s[1]))
    assert inside.size == 9
    for i in inside:
        got = sp3.positions_ecef(d.prns, d.epochs_s[i])
        assert np.abs(got - d.positions_m[i]).max() < 1e-3


def test_sp3_matches_independent_interpolation(sp3: Sp3Orbits) -> None:
    # The fit window of the only interval is 15:00..19:00, 17 samples: the degree-16 fit is their
    # interpolating polynomial, which scipy's barycentric formula computes by a different algorithm.
    # Both are well conditioned in the middle of the window: agreement to rounding (~1e-5 m).
    d = sp3.data
    window = slice(0, 17)
    t_mid = d.epochs_s[4:12] + 450.0
    for j, prn in enumerate(d.prns):
        ref = BarycentricInterpolator(d.epochs_s[window] - d.epochs_s[0], d.positions_m[window, j])
        got = np.array([sp3.positions_ecef([prn], t)[0] for t in t_mid])
        assert np.abs(got - ref(t_mid - d.epochs_s[0])).max() < 1e-3, prn


def test_sp3_interpolation_obeys_gravity_between_samples(sp3: Sp3Orbits) -> None:
    # Newton: in a non-rotating frame the acceleration is -mu r/|r|^3 up to J2 (~1e-4 relative) and
    # sun/moon (~1e-5). A central second difference (h = 10 s) of the interpolated positions must
    # agree to 2e-3 relative mid-way between samples, where a poor interpolant would wiggle.
    h = 10.0
    for t in sp3.data.epochs_s[4:12] + 450.0:
        p = [to_inertial(sp3.positions_ecef(sp3.prns, t + dt), t + dt) for dt in (-h, 0.0, h)]
        acc = (p[0] - 2.0 * p[1] + p[2]) / h**2
        r = np.linalg.norm(p[1], axis=1, keepdims=True)
        gravity = -MU_M3S2 * p[1] / r**3
        rel = np.linalg.norm(acc - gravity, axis=1) / np.linalg.norm(gravity, axis=1)
        assert rel.max() < 2e-3


def test_sp3_time_and_prn_errors(sp3: Sp3Orbits) -> None:
    b, e = sp3.valid_span_s
    sp3.positions_ecef([3], b)
    sp3.positions_ecef([3], e)
    with pytest.raises(OrbitTimeError, match="outside the valid span"):
        sp3.positions_ecef([3], b - 1.0)
    with pytest.raises(OrbitTimeError, match="outside the valid span"):
        sp3.positions_ecef([3], e + 1.0)
    with pytest.raises(ValueError, match="satellite 1 is not in"):
        sp3.positions_ecef([1], b)


def _write(tmp_path: Path, lines: list[str], name: str = "bad.sp3") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="ascii")
    return p


def test_sp3_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.sp3"
    with pytest.raises(Sp3Error, match=r"nope\.sp3"):
        Sp3Orbits(missing)


def _replace(lines: list[str], index: int, new: str) -> tuple[list[str], int]:
    return [*lines[:index], new, *lines[index + 1:]], index + 1


def _insert(lines: list[str], index: int, new: str) -> tuple[list[str], int]:
    return [*lines[:index], new, *lines[index:]], index + 1


# The QRSim file: 22 header lines ('%c' at index 12), epoch lines at 22, 54, ..., 'P  3' at 24.
MALFORMED = {
    "not sp3": (lambda ls: _replace(ls, 0, "garbage"), "not an SP3 file"),
    "no epoch count": (lambda ls: _replace(ls, 0, ls[0][:20]), "number of epochs"),
    "bad epoch": (lambda ls: _replace(ls, 22, "*  2010  8 xx 15 15  0.00000000"), "malformed epoch line"),
    "bad position": (lambda ls: _replace(ls, 24, "P  3   8940.059404 -24787.1x8103    709.441447"),
                     "malformed position record"),
    "epoch order": (lambda ls: _replace(ls, 54, "*  2010  8 31 14 15  0.00000000"), "strictly increasing"),
    "record first": (lambda ls: _insert(ls, 22, "P  2 -15730.536190  13454.671933  16370.778232"),
                     "before the first epoch"),
    "time system": (lambda ls: _replace(ls, 12, "%c G  cc UTC ccc cccc cccc cccc cccc ccccc ccccc"),
                    "time system"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_sp3_malformed_lines_name_file_and_line(sp3_path: Path, tmp_path: Path, case: str) -> None:
    lines = sp3_path.read_text(encoding="ascii").splitlines()
    assert lines[22].startswith("*") and lines[54].startswith("*") and lines[24].startswith("P  3")
    assert lines[12].startswith("%c")
    edit, message = MALFORMED[case]
    edited, line_no = edit(lines)
    bad = _write(tmp_path, edited)
    with pytest.raises(Sp3Error, match=message) as info:
        Sp3Orbits(bad)
    assert f"{bad}, line {line_no}:" in str(info.value)


def test_sp3_too_short_and_empty(sp3_path: Path, tmp_path: Path) -> None:
    lines = sp3_path.read_text(encoding="ascii").splitlines()
    # keep the header and the first 16 epochs (3 h 45 min < the 4 h fit window)
    first_epoch = next(i for i, line in enumerate(lines) if line.startswith("*"))
    short = [*lines[: first_epoch + 16 * 32], "EOF"]
    with pytest.raises(Sp3Error, match="at least 14400 s"):
        Sp3Orbits(_write(tmp_path, short, "short.sp3"))
    with pytest.raises(Sp3Error, match="no epoch lines"):
        Sp3Orbits(_write(tmp_path, [*lines[:first_epoch], "EOF"], "empty.sp3"))


def test_sp3_skips_other_systems_and_reads_sp3c_ids(sp3_path: Path, tmp_path: Path) -> None:
    lines = sp3_path.read_text(encoding="ascii").splitlines()
    edited = []
    for line in lines:
        if line.startswith("P "):
            line = "PG" + line[2:4].replace(" ", "0") + line[4:]  # SP3-c id "G03"
            edited.append(line)
            edited.append("PR01  12345.678901  12345.678901  12345.678901      0.000000")  # GLONASS
        else:
            edited.append(line)
    data = read_sp3(_write(tmp_path, edited, "c.sp3"))
    ref = read_sp3(sp3_path)
    assert data.prns == ref.prns
    np.testing.assert_array_equal(data.positions_m, ref.positions_m)


def test_sp3_absent_position_is_missing(sp3_path: Path, tmp_path: Path) -> None:
    lines = sp3_path.read_text(encoding="ascii").splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("P  3") and i > 300)
    lines[i] = "P  3      0.000000      0.000000      0.000000 999999.999999"
    orbits = Sp3Orbits(_write(tmp_path, lines, "absent.sp3"))
    t = orbits.valid_span_s[0]
    with pytest.raises(OrbitTimeError, match=r"no orbit for satellites \[3\]"):
        orbits.positions_ecef([5, 3], t)
    assert orbits.positions_ecef([5], t).shape == (1, 3)


# --- nominal constellation ----------------------------------------------------------------------------

def test_nominal_constellation_geometry() -> None:
    nc = NominalConstellation()
    assert nc.prns == tuple(range(1, 25)) and nc.default_svs == nc.prns
    assert nc.slot_names[0] == "A1" and nc.slot_names[-1] == "F4"
    t0 = gps_seconds(2021, 3, 4, 5, 6, 7)
    p0 = nc.positions_ecef(nc.prns, t0)
    np.testing.assert_allclose(np.linalg.norm(p0, axis=1), NOMINAL_RADIUS_M, rtol=1e-12)
    assert NOMINAL_RADIUS_M == 26_559_700.0
    # ground tracks repeat every sidereal day (period = half a sidereal day)
    np.testing.assert_allclose(nc.positions_ecef(nc.prns, t0 + SIDEREAL_DAY_S), p0, atol=1e-3)
    # in a non-rotating frame every satellite is back after one period, and half-way opposite
    i0 = to_inertial(p0, t0)
    np.testing.assert_allclose(to_inertial(nc.positions_ecef(nc.prns, t0 + SIDEREAL_DAY_S / 2),
                                           t0 + SIDEREAL_DAY_S / 2), i0, atol=1e-3)
    np.testing.assert_allclose(to_inertial(nc.positions_ecef(nc.prns, t0 + SIDEREAL_DAY_S / 4),
                                           t0 + SIDEREAL_DAY_S / 4), -i0, atol=1e-3)
    # orbit normals: inclination 55 deg, six planes 60 deg apart in node, four satellites per plane
    i1 = to_inertial(nc.positions_ecef(nc.prns, t0 + 60.0), t0 + 60.0)
    normal = np.cross(i0, i1)
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    np.testing.assert_allclose(np.degrees(np.arccos(normal[:, 2])), 55.0, atol=1e-6)
    node = np.degrees(np.arctan2(normal[:, 0], -normal[:, 1])) % 360.0  # ascending node direction
    planes = node.reshape(6, 4)
    np.testing.assert_allclose(planes - planes[:, :1], 0.0, atol=1e-6)  # rounding of the cross product
    np.testing.assert_allclose(np.diff(planes[:, 0]) % 360.0, 60.0, atol=1e-6)
    with pytest.raises(ValueError, match="satellite 25"):
        nc.positions_ecef([25], t0)


def test_nominal_constellation_at_slot_epoch() -> None:
    # At 1993-07-01 00:00 UTC (GHA 18h36m14.4s) slot A3 (RAAN 272.847, argument of latitude 11.676)
    # is 11.676 deg past its ascending node: recompute its ECEF position from the elements by hand.
    nc = NominalConstellation()
    t = gps_seconds(1993, 7, 1) + 9.0  # GPS - UTC = 9 s that day
    node = math.radians(272.847 - (18 + 36 / 60 + 14.4 / 3600) * 15.0)
    u, inc = math.radians(11.676), math.radians(55.0)
    expected = NOMINAL_RADIUS_M * np.array([
        math.cos(node) * math.cos(u) - math.sin(node) * math.sin(u) * math.cos(inc),
        math.sin(node) * math.cos(u) + math.cos(node) * math.sin(u) * math.cos(inc),
        math.sin(u) * math.sin(inc),
    ])
    np.testing.assert_allclose(nc.positions_ecef([3], t)[0], expected, atol=1e-3)


def test_nominal_visibility_at_qrsim_origin_over_a_day() -> None:
    # A satellite at radius r is above elevation E within the Earth-central angle
    # psi = acos(Re cos E / r) - E of the zenith; for E = 10 deg that cap is 29.9 % of the sphere, so
    # 24 uniformly spread satellites give 7.2 on average. Require a daily mean in [6, 9] (GPS planes
    # favour mid latitudes) and at least 4 at all times (the 24-slot design guarantees 4 at 5 deg).
    nc = NominalConstellation()
    site = geodesy.lla_to_ecef(ORIGIN_LLA)
    lat, lon = math.radians(ORIGIN_LLA[0]), math.radians(ORIGIN_LLA[1])
    up = np.array([math.cos(lat) * math.cos(lon), math.cos(lat) * math.sin(lon), math.sin(lat)])
    counts = []
    for t in gps_seconds(2024, 5, 1) + np.arange(0.0, 86400.0, 600.0):
        los = nc.positions_ecef(nc.prns, t) - site
        el = np.degrees(np.arcsin(los @ up / np.linalg.norm(los, axis=1)))
        counts.append(int((el >= 10.0).sum()))
    counts = np.array(counts)
    re_m = geodesy.WGS84_A_M
    psi = math.acos(re_m * math.cos(math.radians(10.0)) / NOMINAL_RADIUS_M) - math.radians(10.0)
    assert 24 * (1 - math.cos(psi)) / 2 == pytest.approx(7.2, abs=0.1)
    assert 6.0 <= counts.mean() <= 9.0
    assert counts.min() >= 4 and counts.max() <= 12


def test_elevation_helper() -> None:
    site = geodesy.lla_to_ecef(np.array([ORIGIN_LLA]))
    up = local_up_ecef(np.array([ORIGIN_LLA[0]]), np.array([ORIGIN_LLA[1]]))
    north = np.array([-math.sin(math.radians(ORIGIN_LLA[0])) * math.cos(math.radians(ORIGIN_LLA[1])),
                      -math.sin(math.radians(ORIGIN_LLA[0])) * math.sin(math.radians(ORIGIN_LLA[1])),
                      math.cos(math.radians(ORIGIN_LLA[0]))])
    sats = np.stack([site[0] + 2e7 * up[0], site[0] + 2e7 * north,
                     site[0] + 2e7 * (north + up[0]) / math.sqrt(2), site[0] - 2e7 * up[0]])
    np.testing.assert_allclose(elevation_deg(site, up, sats)[0], [90.0, 0.0, 45.0, -90.0], atol=1e-9)
