"""GPS satellite orbits and GPS time (spec 3.2, 9): where the satellites are, in ECEF, at a GPS time.

Two orbit providers share one interface (``OrbitProvider``):

- ``NominalConstellation`` (default): the 24-slot baseline GPS constellation, circular orbits
  propagated from published Keplerian slot data, so the GPS model works at any date with no data file.
- ``Sp3Orbits(path)``: precise orbits read from an SP3 file (as QRSim's ``Orbits``), interpolated
  with QRSim's piecewise 16th-order polynomials (Horemuz & Andersson 2006).

``positions_ecef(prns, gps_time_s)`` returns the WGS-84 ECEF positions [m] of the satellites ``prns``
at GPS time ``gps_time_s`` [s since 1980-01-06 00:00:00 GPS]. As in QRSim, no light-time, Sagnac or
satellite-clock terms are modelled: these are geometric positions at the given instant.

GPS time: seconds since the GPS epoch on the GPS time scale (no leap seconds), i.e.
``week * 604800 + seconds of week`` (spec 9). SP3 epochs are already on the GPS scale;
``gps_seconds_from_utc`` adds the leap seconds (GPS - UTC) of a UTC date.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.polynomial import chebyshev

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.validation import ConfigError

# --- GPS time ---------------------------------------------------------------------------------------

SECONDS_PER_WEEK = 604800
SECONDS_PER_DAY = 86400
_GPS_EPOCH_ORDINAL = datetime(1980, 1, 6).toordinal()

#: GPS - UTC [s] from each UTC date on (IERS leap seconds since the GPS epoch; none announced after
#: 2017-01-01 at the time of writing).
LEAP_SECONDS: tuple[tuple[datetime, int], ...] = tuple(
    (datetime(y, m, 1), n) for n, (y, m) in enumerate(
        [(1981, 7), (1982, 7), (1983, 7), (1985, 7), (1988, 1), (1990, 1), (1991, 1), (1992, 7), (1993, 7),
         (1994, 7), (1996, 1), (1997, 7), (1999, 1), (2006, 1), (2009, 1), (2012, 7), (2015, 7), (2017, 1)],
        start=1)
)


def gps_seconds(year: int, month: int, day: int,
                hour: int = 0, minute: int = 0, second: float = 0.0) -> float:
    """GPS time [s] of a calendar date and time given *on the GPS time scale* (SP3 epochs, QRSim's parseTime).

    E.g. ``gps_seconds(2010, 8, 31, 16) == 967305600`` (week 1599, 230400 s), as spec 3.2.
    """
    days = datetime(int(year), int(month), int(day)).toordinal() - _GPS_EPOCH_ORDINAL
    return float(days * SECONDS_PER_DAY + int(hour) * 3600 + int(minute) * 60) + float(second)


def gps_week_sow(gps_time_s: float) -> tuple[int, float]:
    """(GPS week, seconds of week) of a GPS time [s]."""
    week = math.floor(gps_time_s / SECONDS_PER_WEEK)
    return week, float(gps_time_s - week * SECONDS_PER_WEEK)


def gps_seconds_from_week(week: int, seconds_of_week: float) -> float:
    """GPS time [s] from GPS week and seconds of week (spec 9)."""
    return float(week) * SECONDS_PER_WEEK + float(seconds_of_week)


def leap_seconds_at(utc: datetime) -> int:
    """GPS - UTC [s] at a UTC instant (naive datetimes are taken as UTC); 0 before 1981-07-01."""
    naive = utc.astimezone(UTC).replace(tzinfo=None) if utc.tzinfo is not None else utc
    return max((n for start, n in LEAP_SECONDS if naive >= start), default=0)


def gps_seconds_from_utc(utc: datetime) -> float:
    """GPS time [s] of a UTC instant: the calendar time plus the leap seconds GPS - UTC then."""
    naive = utc.astimezone(UTC).replace(tzinfo=None) if utc.tzinfo is not None else utc
    t = gps_seconds(naive.year, naive.month, naive.day, naive.hour, naive.minute,
                    naive.second + naive.microsecond * 1e-6)
    return t + leap_seconds_at(naive)


# --- common interface and geometry ------------------------------------------------------------------

class OrbitTimeError(ValueError):
    """A satellite position was asked for outside the orbit provider's valid time span."""


class OrbitProvider(Protocol):
    """Satellite positions in WGS-84 ECEF at a GPS time."""

    @property
    def prns(self) -> tuple[int, ...]:
        """Satellite ids this provider knows."""
        ...

    @property
    def default_svs(self) -> tuple[int, ...]:
        """Satellites a space segment tracks unless told otherwise."""
        ...

    @property
    def valid_span_s(self) -> tuple[float, float]:
        """[begin, end] GPS times [s] where positions are available (may be infinite)."""
        ...

    @property
    def default_start_window_s(self) -> tuple[float, float]:
        """GPS times [s] from which a random simulation start time is drawn (finite)."""
        ...

    def positions_ecef(self, prns: Sequence[int], gps_time_s: float) -> Array:
        """ECEF positions [m] of satellites ``prns`` at ``gps_time_s``, shape (len(prns), 3)."""
        ...


def local_up_ecef(lat_deg: Array, lon_deg: Array) -> Array:
    """Unit geodetic "up" vectors in ECEF for latitudes/longitudes [deg], shape (N, 3)."""
    lat, lon = np.deg2rad(np.asarray(lat_deg, float)), np.deg2rad(np.asarray(lon_deg, float))
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)


def elevation_deg(receiver_ecef: Array, up_ecef: Array, sats_ecef: Array) -> Array:
    """Elevation [deg] of satellites (S, 3) from receivers (N, 3) with local up vectors (N, 3): (N, S)."""
    los = sats_ecef[None, :, :] - receiver_ecef[:, None, :]
    sin_el = np.einsum("nsk,nk->ns", los, up_ecef) / np.linalg.norm(los, axis=-1)
    return np.rad2deg(np.arcsin(np.clip(sin_el, -1.0, 1.0)))


def _check_prns(requested: Sequence[int], index: dict[int, int], source: str) -> np.ndarray:
    try:
        return np.array([index[int(p)] for p in requested], dtype=int)
    except KeyError as exc:
        raise ValueError(f"satellite {exc.args[0]} is not in {source} (available: {sorted(index)})") from None


# --- nominal constellation --------------------------------------------------------------------------

#: WGS-84 Earth rotation rate [rad/s].
EARTH_ROTATION_RADS = 7.2921151467e-5
#: Nominal semi-major axis (= orbit radius, circular orbits) [m] and inclination [deg] of the GPS slots.
NOMINAL_RADIUS_M = 26_559_700.0
NOMINAL_INCLINATION_DEG = 55.0
#: Period: half a sidereal day [s], so each ground track repeats every sidereal day.
NOMINAL_PERIOD_S = math.pi / EARTH_ROTATION_RADS

# Baseline 24-slot constellation: right ascension of the ascending node (RAAN) of planes A-F and the
# argument of latitude of slots 1-4 at the defined epoch 1993-07-01 00:00 UTC, when the Greenwich hour
# angle was 18 h 36 min 14.4 s (FK5/J2000). Source: GPS Standard Positioning Service Performance Standard
# (4th edition, 2008), Table 3.1-1 "Baseline 24-Slot Constellation Slot Assignments as of the Defined
# Epoch", with the reference orbit (26,559.7 km, e = 0, i = 55 deg) of section 3.1.
_PLANE_RAAN_DEG = {"A": 272.847, "B": 332.847, "C": 32.847, "D": 92.847, "E": 152.847, "F": 212.847}
_SLOT_ARG_LATITUDE_DEG = {
    "A": (268.126, 161.786, 11.676, 41.806),
    "B": (80.956, 173.336, 309.976, 204.376),
    "C": (111.876, 11.796, 339.666, 241.556),
    "D": (135.226, 265.446, 35.156, 167.356),
    "E": (197.046, 302.596, 66.066, 333.686),
    "F": (238.886, 345.226, 105.206, 135.346),
}
_SLOT_EPOCH_UTC = datetime(1993, 7, 1)
_SLOT_EPOCH_GHA_DEG = (18.0 + 36.0 / 60.0 + 14.4 / 3600.0) * 15.0

#: Start of the default day-wide window for a random start time with the nominal constellation.
NOMINAL_DEFAULT_DAY_START_S = gps_seconds(2020, 1, 1)


class NominalConstellation:
    """The 24-slot baseline GPS constellation propagated as circular Keplerian orbits (spec 3.2 alternative).

    Satellite ids 1..24 are the slots A1, A2, ..., F4 (``slot_names``). Each satellite moves on a
    circle of radius 26,559.7 km inclined 55 deg, in its plane's fixed RAAN (nodal regression
    ignored), with a period of half a sidereal day; the Earth rotates at the WGS-84 rate. Positions are
    the nominal slots, not the actual satellites of a date (those drift from their slots and number
    about 31): the geometry (6-10 satellites above 10 deg at mid latitudes) is what matters here.
    Works at any GPS time. ``start_window_s`` is the window for random start times (default: one day
    from 2020-01-01 00:00 GPS; any day gives every geometry, since the pattern repeats each sidereal day).
    """

    def __init__(self, start_window_s: tuple[float, float] | None = None) -> None:
        names, raan, arg_lat = [], [], []
        for plane, slots in _SLOT_ARG_LATITUDE_DEG.items():
            for i, u in enumerate(slots, start=1):
                names.append(f"{plane}{i}")
                raan.append(_PLANE_RAAN_DEG[plane])
                arg_lat.append(u)
        self.slot_names: tuple[str, ...] = tuple(names)
        self._raan_rad = np.deg2rad(raan)
        self._arg_lat0_rad = np.deg2rad(arg_lat)
        self._index = {i + 1: i for i in range(len(names))}
        self.epoch_gps_s = gps_seconds_from_utc(_SLOT_EPOCH_UTC)
        if start_window_s is None:
            start_window_s = (NOMINAL_DEFAULT_DAY_START_S, NOMINAL_DEFAULT_DAY_START_S + SECONDS_PER_DAY)
        b, e = (float(v) for v in start_window_s)
        if not (math.isfinite(b) and math.isfinite(e) and b <= e):
            raise ConfigError(f"start_window_s={start_window_s!r} must be finite [begin, end], begin <= end")
        self._start_window = (b, e)

    @property
    def prns(self) -> tuple[int, ...]:
        return tuple(self._index)

    @property
    def default_svs(self) -> tuple[int, ...]:
        return self.prns

    @property
    def valid_span_s(self) -> tuple[float, float]:
        return (-math.inf, math.inf)

    @property
    def default_start_window_s(self) -> tuple[float, float]:
        return self._start_window

    def positions_ecef(self, prns: Sequence[int], gps_time_s: float) -> Array:
        """ECEF positions [m] of slots ``prns`` (ids 1..24) at GPS time ``gps_time_s`` [s], shape (S, 3)."""
        idx = _check_prns(prns, self._index, "the nominal constellation (ids 1..24)")
        dt = float(gps_time_s) - self.epoch_gps_s
        # reduce the angles modulo 2 pi before adding the epoch values (keeps precision at large dt)
        earth_angle = math.fmod(EARTH_ROTATION_RADS * dt, 2.0 * math.pi)
        u = self._arg_lat0_rad[idx] + 2.0 * earth_angle  # mean motion = twice the Earth rate
        node = self._raan_rad[idx] - (np.deg2rad(_SLOT_EPOCH_GHA_DEG) + earth_angle)  # node longitude in ECEF
        ci = math.cos(math.radians(NOMINAL_INCLINATION_DEG))
        si = math.sin(math.radians(NOMINAL_INCLINATION_DEG))
        cu, su, cn, sn = np.cos(u), np.sin(u), np.cos(node), np.sin(node)
        return NOMINAL_RADIUS_M * np.column_stack([cn * cu - sn * su * ci, sn * cu + cn * su * ci, su * si])


# --- SP3 precise orbits -----------------------------------------------------------------------------

class Sp3Error(ConfigError):
    """An SP3 orbit file is missing or malformed (the message names the file and line)."""


#: Satellites QRSim's tasks track with the SP3 file (spec 3.2, "a typical flight day").
QRSIM_DEFAULT_SVS: tuple[int, ...] = (3, 5, 6, 7, 13, 16, 18, 19, 20, 22, 24, 29, 31)
#: QRSim's polynomial interpolation (spec 3.2, ``Orbits.m``): interval [s], fit window [s], degree.
SP3_INTERVAL_S = 7200.0
SP3_FIT_INTERVAL_S = 14400.0
SP3_POLY_DEGREE = 16
#: Margin before the end of the valid span for random start times (QRSim's TBEFOREEND) [s].
SP3_START_MARGIN_S = 1800.0
_SP3_TIME_SYSTEMS = {"GPS", "CCC", ""}  # "ccc" = placeholder of SP3-a/b files (GPS time)


@dataclass(frozen=True)
class Sp3Data:
    """Raw content of an SP3 file: GPS epochs [s] (E,), PRNs (P,), positions [m] (E, P, 3), NaN = absent."""

    epochs_s: Array
    prns: tuple[int, ...]
    positions_m: Array
    header_num_epochs: int
    header_interval_s: float


def read_sp3(path: str | Path) -> Sp3Data:
    """Parse the GPS satellite positions of an SP3 (a/b/c/d) file.

    Reads the epoch lines ``*`` and position records ``P`` (km -> m); records of other systems
    (GLONASS ``R``, Galileo ``E``, ...) and clocks, velocities and correlation records are skipped.
    Bad or absent positions (0.000000 in SP3) become NaN. Raises ``Sp3Error`` naming the file and the
    line for a missing file or a malformed line. The epoch count of the header is recorded but the
    epoch lines are authoritative (the QRSim file's header announces 96 epochs, it holds 20).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        raise Sp3Error(f"SP3 orbit file {str(p)!r} cannot be read: {exc.strerror or exc}") from None
    lines = text.splitlines()

    def fail(line_no: int, what: str) -> Sp3Error:
        shown = lines[line_no - 1].rstrip() if 0 < line_no <= len(lines) else ""
        return Sp3Error(f"{p}, line {line_no}: {what}: {shown[:80]!r}")

    if not lines or len(lines[0]) < 3 or lines[0][:2] not in ("#a", "#b", "#c", "#d"):
        raise fail(1, "not an SP3 file (line 1 must start with '#a', '#b', '#c' or '#d')")
    try:
        header_num_epochs = int(lines[0][3:].split()[6])
    except (IndexError, ValueError):
        raise fail(1, "cannot read the start epoch and number of epochs") from None
    header_interval_s = math.nan
    if len(lines) > 1 and lines[1].startswith("##"):
        try:
            header_interval_s = float(lines[1][2:].split()[2])
        except (IndexError, ValueError):
            raise fail(2, "cannot read GPS week, seconds of week and epoch interval") from None

    epochs: list[float] = []
    records: list[dict[int, tuple[float, float, float]]] = []
    time_system_checked = False
    for line_no, line in enumerate(lines, start=1):
        tag = line[:1]
        if line.startswith("%c") and not time_system_checked:
            time_system_checked = True
            system = line[9:12].strip().upper()
            if system not in _SP3_TIME_SYSTEMS:
                raise fail(line_no, f"time system {system!r} not supported (GPS time only)")
        elif tag == "*":
            fields = line[1:].split()
            try:
                y, mo, d, h, mi = (int(v) for v in fields[:5])
                t = gps_seconds(y, mo, d, h, mi, float(fields[5]))
            except (IndexError, ValueError):
                raise fail(line_no, "malformed epoch line") from None
            if epochs and t <= epochs[-1]:
                raise fail(line_no, "epochs must be strictly increasing")
            epochs.append(t)
            records.append({})
        elif tag == "P":
            if not epochs:
                raise fail(line_no, "position record before the first epoch line")
            system = line[1:2]
            if system not in (" ", "G"):
                continue  # GLONASS, Galileo, ...: QRSim reads GPS satellites only
            try:
                prn = int(line[2:4])
                xyz = (float(line[4:18]), float(line[18:32]), float(line[32:46]))
            except ValueError:
                raise fail(line_no, "malformed position record") from None
            if not all(math.isfinite(v) for v in xyz):
                raise fail(line_no, "non-finite position")
            records[-1][prn] = xyz
        elif line.startswith("EOF"):
            break
    if not epochs:
        raise Sp3Error(f"{p}: no epoch lines ('*') found")
    prns = tuple(sorted({prn for rec in records for prn in rec}))
    if not prns:
        raise Sp3Error(f"{p}: no GPS position records ('P') found")
    pos = np.full((len(epochs), len(prns), 3), np.nan)
    col = {prn: j for j, prn in enumerate(prns)}
    for i, rec in enumerate(records):
        for prn, xyz in rec.items():
            if any(v != 0.0 for v in xyz):  # all zero = bad or absent orbit (SP3 convention)
                pos[i, col[prn]] = np.array(xyz) * 1000.0
    return Sp3Data(np.array(epochs), prns, pos, header_num_epochs, header_interval_s)


class Sp3Orbits:
    """Satellite positions interpolated from an SP3 precise-orbit file (spec 3.2, QRSim's ``Orbits``).

    Interpolation as QRSim (Horemuz & Andersson 2006): fit intervals of ``SP3_INTERVAL_S`` = 7200 s
    starting ``(FITINT - INTERVAL)/2`` = 3600 s after the first epoch; interval i is fitted, per
    satellite and coordinate, with a polynomial of degree 16 to the epochs in
    [start_i - 3600, start_i + 10800] (the nearest epochs at or outside that window; with 900 s
    epochs exactly 17 samples, so the polynomial interpolates them exactly). The fit uses a Chebyshev
    basis on time scaled to [-1, 1] (same polynomial as MATLAB's centred/scaled ``polyfit``,
    better conditioned). A time is evaluated with the interval whose *start* is closest to it.
    Valid span [first start, last start + 7200 s]; times outside raise ``OrbitTimeError``.
    A satellite with an absent sample in an interval's window has no orbit in that interval.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.data = read_sp3(self.path)
        t = self.data.epochs_s
        lead = 0.5 * (SP3_FIT_INTERVAL_S - SP3_INTERVAL_S)
        num_intervals = math.floor((t[-1] - t[0] - 2.0 * lead) / SP3_INTERVAL_S)
        starts, coefs, domains = [], [], []
        n_prn = len(self.data.prns)
        for i in range(max(num_intervals, 0)):
            start = t[0] + lead + i * SP3_INTERVAL_S
            w0, w1 = start - lead, start - lead + SP3_FIT_INTERVAL_S
            before = np.flatnonzero(t <= w0)
            after = np.flatnonzero(t >= w1)
            if before.size == 0 or after.size == 0:
                break
            sel = slice(before[-1], after[0] + 1)
            ts, ys = t[sel], self.data.positions_m[sel].reshape(-1, n_prn * 3)
            domain = (float(ts[0]), float(ts[-1]))
            x = self._scaled(ts, domain)
            absent = ~np.all(np.isfinite(ys), axis=0)
            c = chebyshev.chebfit(x, np.where(absent, 0.0, ys), min(SP3_POLY_DEGREE, ts.size - 1))
            c[:, absent] = np.nan
            starts.append(start)
            coefs.append(c.reshape(c.shape[0], n_prn, 3))
            domains.append(domain)
        if not starts:
            raise Sp3Error(
                f"{self.path}: epochs span {t[-1] - t[0]:.0f} s; at least {SP3_FIT_INTERVAL_S:.0f} s of "
                "epochs are needed for one interpolation interval")
        self.interval_starts_s = np.array(starts)
        self._coefs = coefs
        self._domains = domains
        self._index = {prn: j for j, prn in enumerate(self.data.prns)}
        self._span = (float(starts[0]), float(starts[-1] + SP3_INTERVAL_S))

    @staticmethod
    def _scaled(t: Array | float, domain: tuple[float, float]) -> Array:
        return (2.0 * (np.asarray(t, float) - domain[0]) / (domain[1] - domain[0])) - 1.0

    @property
    def prns(self) -> tuple[int, ...]:
        return self.data.prns

    @property
    def default_svs(self) -> tuple[int, ...]:
        """QRSim's satellite list if the file has all of them, else every GPS satellite of the file."""
        if all(p in self._index for p in QRSIM_DEFAULT_SVS):
            return QRSIM_DEFAULT_SVS
        return self.prns

    @property
    def valid_span_s(self) -> tuple[float, float]:
        return self._span

    @property
    def default_start_window_s(self) -> tuple[float, float]:
        """QRSim's random-start window: [begin, end - 1800 s] of the valid span (or [begin, begin])."""
        b, e = self._span
        return (b, max(b, e - SP3_START_MARGIN_S))

    def positions_ecef(self, prns: Sequence[int], gps_time_s: float) -> Array:
        """Interpolated ECEF positions [m] of ``prns`` at GPS time ``gps_time_s`` [s], shape (S, 3)."""
        t = float(gps_time_s)
        b, e = self._span
        if not (b - 1e-6 <= t <= e + 1e-6):
            raise OrbitTimeError(
                f"GPS time {t:.3f} s is outside the valid span [{b:.0f}, {e:.0f}] s of {self.path}")
        idx = _check_prns(prns, self._index, str(self.path))
        k = int(np.argmin(np.abs(self.interval_starts_s - t)))  # closest interval start (first on ties)
        c = self._coefs[k][:, idx, :]
        out = chebyshev.chebval(self._scaled(t, self._domains[k]), c.reshape(c.shape[0], -1)).reshape(-1, 3)
        if not np.all(np.isfinite(out)):
            missing = [int(prns[i]) for i in np.flatnonzero(~np.all(np.isfinite(out), axis=1))]
            raise OrbitTimeError(f"{self.path} has no orbit for satellites {missing} at GPS time {t:.0f} s")
        return out
