"""WGS-84 geodesy of QRSim: LLA <-> ECEF, LLA <-> UTM and QRSim's UTM-based "NED" (spec section 9).

Point arrays are vectorised: every function takes one point of shape (3,) or N points of shape (N, 3)
and returns the same leading shape.

- LLA = ``[latitude deg, longitude deg, ellipsoidal height m]`` on WGS-84 (latitude in [-90, 90],
  longitude in [-180, 180]).
- ECEF = ``[x, y, z]`` metres, WGS-84 earth-centred earth-fixed.
- UTM = ``[easting m, northing m, height m]`` plus a zone string ``'%02d%c'`` (e.g. ``'30U'``):
  zone number ``fix(lon/6 + 31)`` (longitude 180 is taken as -180, i.e. zone 1), band letter from
  the latitude ('C' below -72, 'X' from 72 up), **no Norway/Svalbard exceptions**, false easting
  500 000 m, false northing 10 000 000 m in the southern hemisphere (latitude < 0, band letters
  C..M), as the original's ``llaToUtm``/``utmToLla``.
- QRSim "NED" (spec 9): *not* a tangent plane but a UTM grid offset from an origin:
  ``E = origin.E + y``, ``N = origin.N + x``, ``h = origin.h - z``. "North" is UTM grid north
  (about 2.19 deg from true north at the QRSim origin) and horizontal distances carry the UTM grid
  scale (about 1.00006 there); "down" is minus the ellipsoidal height.

The conversions are pyproj (PROJ) transformations: EPSG:4979 <-> EPSG:4978 for ECEF and
EPSG:4326 <-> EPSG:326zz/327zz for UTM (the projection never changes the height, which is passed
through). Transformers are built once per zone and cached.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike
from pyproj import Transformer

from qrsim_ros.core.common.frames import Array

# --- WGS-84 and UTM constants (spec 9) --------------------------------------------------------------
WGS84_A_M = 6378137.0
WGS84_F = 1.0 / 298.257223563
WGS84_E2 = WGS84_F * (2.0 - WGS84_F)
UTM_K0 = 0.9996
UTM_FALSE_EASTING_M = 500_000.0
UTM_FALSE_NORTHING_SOUTH_M = 10_000_000.0

# Band letters for successive 8-degree bands from -80 deg ('C') to 84 deg ('X'); I and O are skipped.
_BAND_LETTERS = "CDEFGHJKLMNPQRSTUVWX"


# --- input checking ---------------------------------------------------------------------------------

def _as_points(points: ArrayLike, name: str) -> tuple[Array, bool]:
    """Return (points as a finite (N, 3) float array, True if a single (3,) point was given)."""
    a = np.asarray(points, dtype=float)
    if a.shape == (3,):
        a, single = a.reshape(1, 3), True
    elif a.ndim == 2 and a.shape[1] == 3:
        single = False
    else:
        raise ValueError(f"{name}: expected shape (3,) or (N, 3), got {a.shape}")
    bad = ~np.isfinite(a)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ValueError(f"{name}: non-finite value {float(a[i, j])!r} in element {j} of point {i}")
    return a, single


def _check_lla(lla: ArrayLike, name: str) -> tuple[Array, bool]:
    """Validate LLA points (degrees, metres); raise ValueError naming ``name`` and the point."""
    a, single = _as_points(lla, name)
    for j, (label, limit) in enumerate((("latitude", 90.0), ("longitude", 180.0))):
        out = np.abs(a[:, j]) > limit
        if out.any():
            i = int(np.argmax(out))
            value = float(a[i, j])
            raise ValueError(f"{name}: {label} {value!r} deg outside [-{limit:g}, {limit:g}] (point {i})")
    return a, single


def _shape_like(a: Array, single: bool) -> Array:
    return a.reshape(3) if single else a


# --- cached transformers ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _geodetic_ecef_transformer() -> Transformer:
    # 3-D geographic WGS-84 (lon, lat, h with always_xy) <-> geocentric WGS-84
    return Transformer.from_crs("EPSG:4979", "EPSG:4978", always_xy=True)


@functools.lru_cache(maxsize=128)
def _utm_transformer(zone_number: int, south: bool) -> Transformer:
    # pure projection (same datum), so no datum-shift grid can be picked by PROJ
    epsg = (32700 if south else 32600) + zone_number
    return Transformer.from_crs("EPSG:4326", f"EPSG:{epsg}", always_xy=True)


def _finite_or_raise(values: Array, name: str) -> Array:
    if not np.all(np.isfinite(values)):
        i = int(np.argmax(~np.all(np.isfinite(values), axis=-1)))
        raise ValueError(f"{name}: conversion failed (non-finite result) for point {i}")
    return values


# --- LLA <-> ECEF -----------------------------------------------------------------------------------

def lla_to_ecef(lla: ArrayLike) -> Array:
    """WGS-84 geodetic ``[lat deg, lon deg, h m]`` -> ECEF ``[x, y, z]`` m (spec 9, ``llaToEcef``)."""
    a, single = _check_lla(lla, "lla")
    x, y, z = _geodetic_ecef_transformer().transform(a[:, 1], a[:, 0], a[:, 2])
    return _shape_like(_finite_or_raise(np.column_stack([x, y, z]), "lla"), single)


def ecef_to_lla(ecef: ArrayLike) -> Array:
    """ECEF ``[x, y, z]`` m -> WGS-84 ``[lat deg, lon deg, h m]`` (spec 9, ``ecefToLla``)."""
    a, single = _as_points(ecef, "ecef")
    lon, lat, h = _geodetic_ecef_transformer().transform(a[:, 0], a[:, 1], a[:, 2], direction="INVERSE")
    return _shape_like(_finite_or_raise(np.column_stack([lat, lon, h]), "ecef"), single)


# --- UTM zones --------------------------------------------------------------------------------------

def utm_zone_number(lon_deg: float) -> int:
    """QRSim's UTM zone number ``fix(lon/6 + 31)`` for a longitude in [-180, 180] deg.

    Longitude 180 deg (which the formula would put in a non-existent zone 61) is the same
    meridian as -180 deg and is given zone 1. No Norway/Svalbard exceptions.
    """
    lon = float(lon_deg)
    if not np.isfinite(lon) or abs(lon) > 180.0:
        raise ValueError(f"lon_deg: longitude {lon!r} deg outside [-180, 180]")
    return int(_zone_numbers(np.array([lon]))[0])


def utm_band_letter(lat_deg: float) -> str:
    """UTM latitude band letter: 'C' below -72 deg, then 'D'..'W' per 8 deg, 'X' from 72 deg up."""
    lat = float(lat_deg)
    if not np.isfinite(lat) or abs(lat) > 90.0:
        raise ValueError(f"lat_deg: latitude {lat!r} deg outside [-90, 90]")
    return _BAND_LETTERS[int(_band_index(np.array([lat]))[0])]


def _band_index(lat_deg: Array) -> Array:
    # 8-degree bands from -80 deg; QRSim puts everything below -72 in 'C' and from 72 up in 'X'
    index = np.floor((lat_deg + 80.0) / 8.0).astype(int)
    return np.where(lat_deg < -72.0, 0, np.minimum(index, len(_BAND_LETTERS) - 1))


def _zone_numbers(lon_deg: Array) -> Array:
    zone = np.trunc(lon_deg / 6.0 + 31.0).astype(int)  # MATLAB fix() truncates towards zero
    return np.where(zone == 61, 1, zone)  # lon = 180 is the meridian -180, zone 1


def utm_zone(lat_deg: float, lon_deg: float) -> str:
    """Zone string ``'%02d%c'`` (number and band letter), e.g. ``utm_zone(51.7119, -0.21052) == '30U'``."""
    return f"{utm_zone_number(lon_deg):02d}{utm_band_letter(lat_deg)}"


def parse_utm_zone(zone: str) -> tuple[int, bool]:
    """Split a zone string like ``'30U'`` into (zone number 1..60, southern hemisphere flag).

    As the original ``utmToLla``, the hemisphere comes from the band letter: letters up to 'M' are
    southern (false northing 10 000 000 m), 'N' and above northern.
    """
    text = str(zone).strip().upper()
    number_text, letter = text[:-1], text[-1:]
    if not number_text.isdigit() or letter not in _BAND_LETTERS or not 1 <= int(number_text) <= 60:
        raise ValueError(f"zone: expected a UTM zone like '30U' (1..60 and a band letter C..X), got {zone!r}")
    return int(number_text), letter <= "M"


# --- LLA <-> UTM ------------------------------------------------------------------------------------

def _project(lat: Array, lon: Array, zone_number: int, south: bool) -> tuple[Array, Array]:
    e, n = _utm_transformer(zone_number, south).transform(lon, lat)
    return np.asarray(e, float), np.asarray(n, float)


def _unproject(e: Array, n: Array, zone_number: int, south: bool) -> tuple[Array, Array]:
    lon, lat = _utm_transformer(zone_number, south).transform(e, n, direction="INVERSE")
    return np.asarray(lat, float), np.asarray(lon, float)


def lla_to_utm(lla: ArrayLike) -> tuple[Array, str | list[str]]:
    """WGS-84 ``[lat deg, lon deg, h m]`` -> (UTM ``[E m, N m, h m]``, zone) (spec 9, ``llaToUtm``).

    Each point is projected in its own zone (see module doc). Returns ``(enh (3,), '30U')`` for one
    point and ``(enh (N, 3), [zone, ...])`` for N points; h is passed through unchanged.
    """
    a, single = _check_lla(lla, "lla")
    numbers, bands = _zone_numbers(a[:, 1]), _band_index(a[:, 0])
    south = a[:, 0] < 0.0  # same split as the band letters: C..M south, N..X north
    enh = np.empty_like(a)
    enh[:, 2] = a[:, 2]
    for number, s in {(int(n), bool(b)) for n, b in zip(numbers, south, strict=True)}:
        sel = (numbers == number) & (south == s)
        enh[sel, 0], enh[sel, 1] = _project(a[sel, 0], a[sel, 1], number, s)
    _finite_or_raise(enh, "lla")
    zones = [f"{n:02d}{_BAND_LETTERS[b]}" for n, b in zip(numbers.tolist(), bands.tolist(), strict=True)]
    return (enh[0], zones[0]) if single else (enh, zones)


def utm_to_lla(enh: ArrayLike, zone: str | list[str]) -> Array:
    """UTM ``[E m, N m, h m]`` in ``zone`` (one string, or one per point) -> ``[lat deg, lon deg, h m]``.

    Inverse of :func:`lla_to_utm` (spec 9, ``utmToLla``); the hemisphere comes from the band letter.
    """
    a, single = _as_points(enh, "enh")
    zones = np.array([zone] * a.shape[0] if isinstance(zone, str) else list(zone), dtype=object)
    if zones.shape != (a.shape[0],):
        raise ValueError(f"zone: got {zones.size} zones for {a.shape[0]} points")
    lla = np.empty_like(a)
    lla[:, 2] = a[:, 2]
    for z in set(zones.tolist()):
        sel = zones == z
        number, south = parse_utm_zone(z)
        lla[sel, 0], lla[sel, 1] = _unproject(a[sel, 0], a[sel, 1], number, south)
    return _shape_like(_finite_or_raise(lla, "enh"), single)


# --- the QRSim "NED" frame --------------------------------------------------------------------------

@dataclass(frozen=True)
class UtmOrigin:
    """UTM coordinates of a NED origin (QRSim's ``originutmcoords {E, N, zone, h}``)."""

    easting_m: float
    northing_m: float
    height_m: float
    zone_number: int
    south: bool
    zone: str  # '%02d%c', e.g. '30U'


@dataclass(frozen=True)
class GeodeticOrigin:
    """Origin of a QRSim NED frame: WGS-84 latitude/longitude [deg] and ellipsoidal height [m].

    ``utm_origin`` gives its UTM coordinates; the NED frame is the UTM grid of that zone (spec 9).
    """

    lat_deg: float
    lon_deg: float
    alt_m: float = 0.0

    def __post_init__(self) -> None:
        _check_lla([self.lat_deg, self.lon_deg, self.alt_m], "origin")

    @classmethod
    def from_utm(cls, easting_m: float, northing_m: float, zone: str, alt_m: float = 0.0) -> GeodeticOrigin:
        """Origin from QRSim-style UTM coordinates (the lat/lon round trip is exact to ~1e-9 m)."""
        lat, lon, _ = utm_to_lla([easting_m, northing_m, alt_m], zone)
        return cls(float(lat), float(lon), float(alt_m))

    @cached_property
    def utm_origin(self) -> UtmOrigin:
        """UTM easting/northing [m], height [m] and zone of the origin."""
        enh, zone = lla_to_utm([self.lat_deg, self.lon_deg, self.alt_m])
        number, south = parse_utm_zone(str(zone))
        return UtmOrigin(float(enh[0]), float(enh[1]), float(enh[2]), number, south, str(zone))


#: NED origin of the QRSim scenarios (UCL; spec 8.3 item 8 spot value ``'30U'``).
QRSIM_ORIGIN = GeodeticOrigin(51.71190, -0.21052, 0.0)


def ned_to_lla(ned: ArrayLike, origin: GeodeticOrigin) -> Array:
    """QRSim NED ``[x m, y m, z m]`` -> WGS-84 ``[lat deg, lon deg, h m]`` (spec 9).

    ``E = origin.E + y``, ``N = origin.N + x``, ``h = origin.h - z``, unprojected in the origin's zone.
    """
    a, single = _as_points(ned, "ned")
    o = origin.utm_origin
    lat, lon = _unproject(o.easting_m + a[:, 1], o.northing_m + a[:, 0], o.zone_number, o.south)
    lla = np.column_stack([lat, lon, o.height_m - a[:, 2]])
    return _shape_like(_finite_or_raise(lla, "ned"), single)


def lla_to_ned(lla: ArrayLike, origin: GeodeticOrigin) -> Array:
    """WGS-84 ``[lat deg, lon deg, h m]`` -> QRSim NED ``[x, y, z]`` m (spec 9), inverse of ned_to_lla.

    The point is projected in the *origin's* zone. The original projects it in its own zone and does
    not check for a mismatch; both agree whenever the point lies in the origin's zone, and this way
    the conversion stays continuous (and the exact inverse of ``ned_to_lla``) across a zone edge.
    """
    a, single = _check_lla(lla, "lla")
    o = origin.utm_origin
    e, n = _project(a[:, 0], a[:, 1], o.zone_number, o.south)
    ned = np.column_stack([n - o.northing_m, e - o.easting_m, o.height_m - a[:, 2]])
    return _shape_like(_finite_or_raise(ned, "lla"), single)


def ned_to_ecef(ned: ArrayLike, origin: GeodeticOrigin) -> Array:
    """QRSim NED ``[x, y, z]`` m -> ECEF m via UTM and LLA (spec 9, ``nedToEcef``)."""
    return lla_to_ecef(ned_to_lla(ned, origin))


def ecef_to_ned(ecef: ArrayLike, origin: GeodeticOrigin) -> Array:
    """ECEF m -> QRSim NED ``[x, y, z]`` m via LLA and UTM (spec 9, ``ecefToNed``)."""
    return lla_to_ned(ecef_to_lla(ecef), origin)
