"""Tests of qrsim_ros.core.common.geodesy: spec 8.1 testCoordinateConversions, 8.3 item 8 and section 9.

The original's test vectors are missing from the mirror, so besides the original round-trip grids and
tolerances the conversions are checked against independent oracles written here from the closed
forms (LLA->ECEF, the UTM meridian arc) and against properties of the projection.
"""

from __future__ import annotations

import numpy as np
import pytest

from qrsim_ros.core.common import geodesy as g

A_M = 6378137.0
F = 1.0 / 298.257223563
E2 = 1.0 - (1.0 - F) ** 2  # as the original's llaToEcef


def grid(*axes: np.ndarray) -> np.ndarray:
    """All combinations of the axes as rows (N, len(axes))."""
    return np.stack([m.ravel() for m in np.meshgrid(*axes, indexing="ij")], axis=1)


def closed_form_ecef(lla: np.ndarray) -> np.ndarray:
    """Independent LLA->ECEF oracle (standard closed form, spec 9)."""
    phi, lam, h = np.deg2rad(lla[:, 0]), np.deg2rad(lla[:, 1]), lla[:, 2]
    n = A_M / np.sqrt(1.0 - E2 * np.sin(phi) ** 2)
    x = (n + h) * np.cos(phi) * np.cos(lam)
    y = (n + h) * np.cos(phi) * np.sin(lam)
    z = (n * (1.0 - E2) + h) * np.sin(phi)
    return np.column_stack([x, y, z])


def meridian_arc_m(lat_deg: float) -> float:
    """Independent oracle: WGS-84 meridian arc length from the equator [m], 64-point Gauss-Legendre.

    The integrand M(phi) = a (1 - e2) / (1 - e2 sin^2 phi)^1.5 is smooth, so the rule is exact to
    round-off (~1e-9 m).
    """
    nodes, weights = np.polynomial.legendre.leggauss(64)
    half = 0.5 * np.deg2rad(lat_deg)
    phi = half * (nodes + 1.0)
    return float(half * np.sum(weights * A_M * (1.0 - E2) / (1.0 - E2 * np.sin(phi) ** 2) ** 1.5))


# --- spot value and original round trips (spec 8.1, 8.3 item 8) --------------------------------------

def test_spot_value_qrsim_origin() -> None:
    enh, zone = g.lla_to_utm([51.71190, -0.21052, 0.0])
    assert zone == "30U"
    np.testing.assert_allclose(enh[:2], [692708.5780511, 5732679.0332175], rtol=0, atol=1e-4)
    o = g.QRSIM_ORIGIN.utm_origin
    assert (o.zone, o.zone_number, o.south) == ("30U", 30, False)
    assert o.easting_m == pytest.approx(692708.5780511, abs=1e-4)
    assert o.northing_m == pytest.approx(5732679.0332175, abs=1e-4)


def test_lla_ecef_round_trip_original_grid() -> None:
    lla = grid(np.arange(-78, 79, 8.0), np.arange(-177, 178, 6.0), np.arange(0, 101, 10.0))
    back = g.ecef_to_lla(g.lla_to_ecef(lla))
    assert np.abs(back[:, 0:2] - lla[:, 0:2]).max() < 1e-11
    assert np.abs(back[:, 2] - lla[:, 2]).max() < 1e-7


def test_lla_to_ecef_matches_closed_form() -> None:
    lla = grid(np.arange(-90, 91, 7.5), np.arange(-180, 181, 15.0), np.array([-100.0, 0.0, 123.4, 9000.0]))
    np.testing.assert_allclose(g.lla_to_ecef(lla), closed_form_ecef(lla), rtol=0, atol=5e-7)


def test_utm_round_trip_original_grid() -> None:
    # original lat -86:8:86 on the central meridians (lon -177:6:177), plus points off them
    lat = np.arange(-86, 87, 8.0)
    lon = np.concatenate([np.arange(-177, 178, 6.0), np.arange(-179.9, 180, 6.0) + 0.05, [180.0, -180.0]])
    lla = grid(lat, lon, np.array([0.0, 55.0]))
    enh, zones = g.lla_to_utm(lla)
    back = g.utm_to_lla(enh, zones)
    dlon = (back[:, 1] - lla[:, 1] + 180.0) % 360.0 - 180.0  # 180 comes back as -180
    assert np.abs(back[:, 0] - lla[:, 0]).max() < 1e-9
    assert np.abs(dlon).max() < 1e-9
    np.testing.assert_array_equal(back[:, 2], lla[:, 2])
    # and per point, with scalar (3,) calls returning a zone string
    e1, z1 = g.lla_to_utm(lla[7])
    assert isinstance(z1, str) and z1 == zones[7]
    np.testing.assert_array_equal(e1, enh[7])


def test_ned_round_trip_original_grid() -> None:
    rng = np.random.default_rng(20131006)
    lats, lons = rng.uniform(-80, 80, 3), rng.uniform(-180, 180, 3)
    xy = np.arange(-100, 101, 10.0)
    worst = 0.0
    for lat in lats:
        for lon in lons:
            for h in np.arange(0, 101, 10.0):
                origin = g.GeodeticOrigin(lat, lon, h)
                ned = grid(xy, xy, np.array([h]))
                back = g.ecef_to_ned(g.ned_to_ecef(ned, origin), origin)
                worst = max(worst, float(np.abs(back - ned).max()))
    assert worst < 5e-7


# --- independent UTM checks -------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("lat", "lon", "zone"),
    [
        (51.71190, -0.21052, "30U"),  # QRSim origin (UCL)
        (0.0, 0.0, "31N"),  # equator belongs to the north
        (-0.1, 0.0, "31M"),
        (-33.8688, 151.2093, "56H"),  # Sydney
        (40.7128, -74.0060, "18T"),  # New York
        (60.39, 5.32, "31V"),  # Bergen: official UTM says 32V, QRSim has no Norway exception
        (78.2, 10.0, "32X"),  # Svalbard: zone 32X does not exist officially
        (-72.0, 0.0, "31D"),
        (-72.1, 0.0, "31C"),
        (71.9, 0.0, "31W"),
        (72.0, 0.0, "31X"),
        (84.0, -180.0, "01X"),
        (10.0, 180.0, "01P"),  # 180 deg is the -180 meridian, zone 1 (fix(180/6+31) would be 61)
        (10.0, 179.99, "60P"),
    ],
)
def test_zone_and_band_letter(lat: float, lon: float, zone: str) -> None:
    assert g.utm_zone(lat, lon) == zone
    assert g.lla_to_utm([lat, lon, 0.0])[1] == zone


def test_central_meridian_maps_to_false_easting() -> None:
    lat = np.array([-80.0, -45.3, -1e-6, 0.0, 12.3, 51.7, 84.0])
    for zone in range(1, 61):
        lla = np.column_stack([lat, np.full(lat.shape, 6.0 * zone - 183.0), np.zeros(lat.shape)])
        enh, zones = g.lla_to_utm(lla)
        assert all(int(z[:2]) == zone for z in zones)
        # PROJ converts lon and lon0 to radians separately: exact up to a few nm
        assert np.abs(enh[:, 0] - 500000.0).max() < 1e-8


def test_central_meridian_northing_is_scaled_meridian_arc() -> None:
    for lat in (0.0, 8.0, 37.5, 51.7119, 72.0, 84.0):
        enh, _ = g.lla_to_utm([lat, 3.0, 0.0])
        assert enh[1] == pytest.approx(0.9996 * meridian_arc_m(lat), abs=1e-6)


def test_southern_false_northing() -> None:
    for lat, lon in [(12.0, 3.0), (33.3, 14.1), (0.5, -100.2), (79.0, 45.0)]:
        north, zn = g.lla_to_utm([lat, lon, 0.0])
        south, zs = g.lla_to_utm([-lat, lon, 0.0])
        assert zn[:2] == zs[:2] and zn[2] > "M" >= zs[2]
        # transverse Mercator is symmetric about the equator; the south adds FN = 10 000 000 m
        assert south[0] == pytest.approx(north[0], abs=1e-8)
        assert south[1] == pytest.approx(10_000_000.0 - north[1], abs=1e-8)
    just_south, _ = g.lla_to_utm([-1e-6, 3.0, 0.0])
    assert 9_999_999.8 < just_south[1] < 10_000_000.0


# --- QRSim "NED" sanity -----------------------------------------------------------------------------

def test_ned_is_a_utm_grid_offset() -> None:
    o = g.QRSIM_ORIGIN
    p0 = g.ned_to_ecef([0.0, 0.0, 0.0], o)
    np.testing.assert_allclose(p0, g.lla_to_ecef([o.lat_deg, o.lon_deg, o.alt_m]), rtol=0, atol=1e-6)
    for step, axis in (([1.0, 0.0, 0.0], 1), ([0.0, 1.0, 0.0], 0)):
        lla = g.ned_to_lla(step, o)
        enh, zone = g.lla_to_utm(lla)
        assert zone == "30U"
        moved = enh[:2] - [o.utm_origin.easting_m, o.utm_origin.northing_m]
        assert moved[axis] == pytest.approx(1.0, abs=1e-8)  # +x -> northing, +y -> easting
        assert moved[1 - axis] == pytest.approx(0.0, abs=1e-8)
        assert lla[2] == o.alt_m
        # 1 grid metre is 1 ground metre up to the UTM grid scale (~1.00006 here)
        assert np.linalg.norm(g.ned_to_ecef(step, o) - p0) == pytest.approx(1.0, rel=1e-3)
    # +z is down: the ellipsoidal height drops by exactly 1 m
    assert g.ned_to_lla([0.0, 0.0, 1.0], o)[2] == o.alt_m - 1.0
    assert np.linalg.norm(g.ned_to_ecef([0.0, 0.0, 1.0], o) - p0) == pytest.approx(1.0, abs=1e-6)


def test_ned_lla_inverse_and_vectorised_shapes() -> None:
    o = g.GeodeticOrigin(-33.9, 18.4, 25.0)
    ned = np.array([[0.0, 0.0, 0.0], [120.5, -33.2, -40.0], [-5000.0, 7000.0, 3.0]])
    lla = g.ned_to_lla(ned, o)
    assert lla.shape == (3, 3)
    np.testing.assert_allclose(g.lla_to_ned(lla, o), ned, rtol=0, atol=1e-8)
    np.testing.assert_allclose(g.lla_to_ned(lla[1], o), ned[1], rtol=0, atol=1e-8)
    assert g.lla_to_ecef(lla[1]).shape == (3,)
    assert g.ecef_to_lla(g.lla_to_ecef(lla)).shape == (3, 3)


def test_ned_across_a_zone_edge_uses_the_origin_zone() -> None:
    o = g.GeodeticOrigin(51.5, -0.01, 0.0)  # zone 30, 0.01 deg west of the zone-31 edge
    ned = np.array([[10.0, 5000.0, -2.0]])  # 5 km east: inside zone 31
    assert g.lla_to_utm(g.ned_to_lla(ned, o))[1] == ["31U"]
    np.testing.assert_allclose(g.ecef_to_ned(g.ned_to_ecef(ned, o), o), ned, rtol=0, atol=5e-7)


def test_from_utm_origin() -> None:
    o = g.GeodeticOrigin.from_utm(692708.5780511, 5732679.0332175, "30U", 12.0)
    assert o.lat_deg == pytest.approx(51.71190, abs=1e-9)
    assert o.lon_deg == pytest.approx(-0.21052, abs=1e-9)
    assert o.utm_origin.height_m == 12.0


# --- errors -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: g.lla_to_ecef([np.nan, 0.0, 0.0]), r"^lla: non-finite"),
        (lambda: g.lla_to_ecef([[0.0, 0.0, 0.0], [91.0, 0.0, 0.0]]), r"^lla: latitude 91\.0 .*point 1"),
        (lambda: g.lla_to_utm([-90.5, 0.0, 0.0]), r"^lla: latitude"),
        (lambda: g.lla_to_utm([10.0, 181.0, 0.0]), r"^lla: longitude"),
        (lambda: g.lla_to_ecef([1.0, 2.0]), r"^lla: expected shape"),
        (lambda: g.ecef_to_lla([np.inf, 0.0, 0.0]), r"^ecef: non-finite"),
        (lambda: g.utm_to_lla([500000.0, 0.0, 0.0], "61U"), r"^zone:"),
        (lambda: g.utm_to_lla([500000.0, 0.0, 0.0], "30I"), r"^zone:"),
        (lambda: g.utm_to_lla([[500000.0, 0.0, 0.0]] * 2, ["30U"]), r"^zone: got 1 zones for 2"),
        (lambda: g.ned_to_lla([0.0, np.nan, 0.0], g.QRSIM_ORIGIN), r"^ned: non-finite"),
        (lambda: g.GeodeticOrigin(float("nan"), 0.0, 0.0), r"^origin: non-finite"),
        (lambda: g.GeodeticOrigin(95.0, 0.0, 0.0), r"^origin: latitude"),
        (lambda: g.utm_band_letter(float("nan")), r"^lat_deg:"),
        (lambda: g.utm_zone_number(-180.5), r"^lon_deg:"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_argument(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
