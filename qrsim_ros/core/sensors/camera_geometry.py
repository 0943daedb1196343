"""Pinhole geometry of the downward camera and its window grid (spec 3.5, ``cam_prj``, ``inv_cam_prjZ0``).

Frames: world NED [m], body FRD, camera frame ``p_cam = R_cb @ p_body`` with the optical axis along
camera z. Pixels: ``u`` along camera x, ``v`` along camera y, principal point ``c`` [px], focal lengths
``f`` [px]; a pixel is in the image when ``0 <= uv <= 2c`` (QRSim assumes the principal point at the
sensor centre). With QRSim's mounting ``r = [0, 0, pi/2]``: camera x = body y (right), camera y = -body x
(backwards), optical axis = body z (down).

The ground is the plane z = 0 (NED), as in QRSim. Everything here is for one vehicle state ``x``
(13,) (only ``x[0:6]`` are used) and vectorised over points.

The formulas are written once, as scalar kernels compiled by numba when available
(``qrsim_ros.core.common.jit``): the projection ``_project_point``, the ray-ground intersection
``_ground_point``, the grid rule ``_window_grid`` and the pixel -> window rule ``_window_index``. The
public methods use them, and so do the frame kernels behind ``CameraGeometry.frames`` and
``person_windows``: spec 3.5 update steps 1, 2, 4 and 5 for the frames of all vehicles in a few
compiled calls (windows stacked in flat arrays, ``FrameBatch``) instead of hundreds of small numpy
operations per frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array, dcm_ned_to_body
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, F8_3D_IN, njit
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED, dcm_ned_to_body_entries

#: Corner offsets of a square ground patch of unit side, QRSim's order (``Person.m``): columns are
#: (+x,-y), (+x,+y), (-x,-y), (-x,+y), so corners 0-3 and 1-2 are the diagonals.
_UNIT_SQUARE_NE = 0.5 * np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, -1.0], [-1.0, 1.0]])

#: Assignment helper points: centroids of (corner a, corner b, person centre) for these corner pairs
#: (the four sides of the person's square in QRSim's corner order).
_SIDE_PAIRS = np.array([[3, 2], [1, 0], [2, 0], [3, 1]], dtype=np.int64)

#: ``CameraGeometry.frame_setup`` status codes.
FRAME_OK = 0
FRAME_NON_FINITE_STATE = 1
FRAME_NO_GROUND = 2


def camera_rotation(r_body_rad: ArrayLike) -> Array:
    """Body -> camera rotation for QRSim's camera Euler angles ``r = [r1, r2, r3]`` [rad].

    QRSim builds ``angleToDcm(r3, r2, r1, 'ZYX')``, i.e. yaw r3, pitch r2, roll r1 with the same
    convention as the vehicle attitude, hence ``dcm_ned_to_body(phi=r1, theta=r2, psi=r3)``.
    """
    r = np.asarray(r_body_rad, float)
    return dcm_ned_to_body(r[0], r[1], r[2])


def square_corners(centres_ned: ArrayLike, side_m: float) -> Array:
    """Corners (P, 4, 3) of axis-aligned (north/east) square ground patches of side ``side_m`` [m].

    Corner order as QRSim's person bounding box; the corners keep each centre's z.
    """
    c = np.atleast_2d(np.asarray(centres_ned, float))
    corners = np.repeat(c[:, None, :], 4, axis=1)
    corners[:, :, :2] += side_m * _UNIT_SQUARE_NE
    return corners


def quad_area(corners_px: ArrayLike) -> Array:
    """Area [px^2] of convex quadrilaterals (..., 4, 2) in QRSim's corner order: half |diag x diag|."""
    q = np.asarray(corners_px, float)
    ac = q[..., 0, :] - q[..., 3, :]
    bd = q[..., 1, :] - q[..., 2, :]
    return 0.5 * np.abs(ac[..., 0] * bd[..., 1] - ac[..., 1] * bd[..., 0])


# --- kernels: the formulas (compiled by numba when available, plain Python otherwise) ----------------
# m is the NED -> camera rotation R @ dcm(x) (3, 3); x a vehicle state (>= 6,) (tp = x[0:3]); f, c (2,).

_ROW_IN, _MAT_IN = F8_1D_IN, F8_2D_IN
_CAM = f"{_MAT_IN}, {_ROW_IN}, {_ROW_IN}, {_ROW_IN}"  # m, x, f, c
_I8_1D_IN = "Array(int64, 1, 'A', readonly=True)"
_B1_IN = "Array(boolean, 1, 'A', readonly=True)"


@njit(f"void({_MAT_IN}, {_ROW_IN}, float64[:, ::1])")
def _world_to_camera_into(rotation, x, m):
    """m (3, 3) <- rotation @ dcm_ned_to_body(x[3], x[4], x[5])."""
    # sin/cos of an infinite angle is NaN, as with numpy (plain Python's math.sin(inf) would raise)
    phi = math.nan if math.isinf(x[3]) else x[3]
    theta = math.nan if math.isinf(x[4]) else x[4]
    psi = math.nan if math.isinf(x[5]) else x[5]
    d = dcm_ned_to_body_entries(phi, theta, psi)
    for i in range(3):
        for j in range(3):
            m[i, j] = rotation[i, 0] * d[j] + rotation[i, 1] * d[3 + j] + rotation[i, 2] * d[6 + j]


@njit(f"Tuple((float64, float64, boolean))(float64, float64, float64, {_CAM})")
def _project_point(p0, p1, p2, m, x, f, c):
    """(u, v, visible) of the NED point p (``cam_prj``); u = v = NaN where not visible."""
    d0, d1, d2 = p0 - x[0], p1 - x[1], p2 - x[2]
    q0 = d0 * m[0, 0] + d1 * m[0, 1] + d2 * m[0, 2]
    q1 = d0 * m[1, 0] + d1 * m[1, 1] + d2 * m[1, 2]
    q2 = d0 * m[2, 0] + d1 * m[2, 1] + d2 * m[2, 2]
    if not q2 > 0.0:  # behind the camera or in its plane (QRSim divided by zero there)
        return math.nan, math.nan, False
    u = f[0] * q0 / q2 + c[0]
    v = f[1] * q1 / q2 + c[1]
    if 0.0 <= u <= 2.0 * c[0] and 0.0 <= v <= 2.0 * c[1]:
        return u, v, True
    return math.nan, math.nan, False


@njit(f"UniTuple(float64, 3)(float64, float64, float64, {_ROW_IN})")
def _ground_of_ray(r0, r1, r2, x):
    """Where the ray from the camera x[0:3] along (r0, r1, r2) (NED) meets z = 0; NaN if it does not
    reach the ground in front of the camera."""
    if not r2 > 0.0:  # parallel to the ground or pointing up
        return math.nan, math.nan, math.nan
    s = -x[2] / r2
    if not (s > 0.0 and math.isfinite(s)):  # the camera is at or below the ground
        return math.nan, math.nan, math.nan
    return x[0] + s * r0, x[1] + s * r1, 0.0


@njit(f"UniTuple(float64, 3)(float64, float64, {_CAM})")
def _ground_point(u, v, m, x, f, c):
    """Ground point (NED) of the ray through pixel (u, v) (``inv_cam_prjZ0``); NaN if the ray does not
    reach z = 0 in front of the camera."""
    a = (u - c[0]) / f[0]
    b = (v - c[1]) / f[1]
    # ray in NED: m.T @ [a, b, 1]
    return _ground_of_ray(a * m[0, 0] + b * m[1, 0] + m[2, 0], a * m[0, 1] + b * m[1, 1] + m[2, 1],
                          a * m[0, 2] + b * m[1, 2] + m[2, 2], x)


@njit("UniTuple(float64, 6)(float64, float64, float64, float64)")
def _window_grid(side_px, c0, c1, min_side_px):
    """(nf1, nf2, df1, df2, offf1, offf2) of ``WindowGrid.from_window_side`` as floats."""
    side = max(side_px, min_side_px) if math.isfinite(side_px) else min_side_px
    size0, size1 = 2.0 * c0, 2.0 * c1
    nf0 = max(1.0, np.floor(size0 / side + 0.5))  # MATLAB round (half away from zero), >= 1
    nf1 = max(1.0, np.floor(size1 / side + 0.5))
    df0, df1 = np.floor(size0 / nf0), np.floor(size1 / nf1)
    off0, off1 = np.floor((size0 % df0) / 2.0), np.floor((size1 % df1) / 2.0)  # % = fmod: both positive
    return nf0, nf1, df0, df1, off0, off1


@njit("int64(float64, float64, float64, int64)")
def _window_index(u_px, offset_px, window_px, num_windows):
    """0-based window index along one axis of an in-image pixel coordinate: QRSim's ceil((u - offf) / df)
    (1-based), clamped to [0, num_windows - 1]."""
    k = math.ceil((u_px - offset_px) / window_px) - 1
    return min(max(k, 0), num_windows - 1)


@njit(f"void({_MAT_IN}, int64, int64, int64, int64, int64, int64, int64[::1], int64[::1])")
def _window_index_rows(uv, nf1, nf2, df1, df2, off1, off2, j, i):
    for k in range(uv.shape[0]):
        j[k] = _window_index(uv[k, 0], float(off1), float(df1), nf1)
        i[k] = _window_index(uv[k, 1], float(off2), float(df2), nf2)


@njit(f"float64({_MAT_IN})")
def _quad_area(q):
    """``quad_area`` of one quadrilateral (4, 2)."""
    ac0, ac1 = q[0, 0] - q[3, 0], q[0, 1] - q[3, 1]
    bd0, bd1 = q[1, 0] - q[2, 0], q[1, 1] - q[2, 1]
    return 0.5 * abs(ac0 * bd1 - ac1 * bd0)


@njit(f"void({_MAT_IN}, {_CAM}, float64[:, ::1], boolean[::1])")
def _project_rows(points, m, x, f, c, uv, visible):
    for k in range(points.shape[0]):
        uv[k, 0], uv[k, 1], visible[k] = _project_point(points[k, 0], points[k, 1], points[k, 2], m, x, f, c)


@njit(f"void({_MAT_IN}, {_CAM}, float64[:, ::1])")
def _ground_rows(uv, m, x, f, c, out):
    for k in range(uv.shape[0]):
        out[k, 0], out[k, 1], out[k, 2] = _ground_point(uv[k, 0], uv[k, 1], m, x, f, c)


@njit(f"int64({_ROW_IN}, {_MAT_IN}, {_ROW_IN}, {_ROW_IN}, float64, float64, float64[:, ::1], float64[::1], "
      "int64[::1])")
def _frame_setup(x, rotation, f, c, person_size_m, min_window_px, m, fcg_sigmaf, grid):
    """Spec 3.5 update steps 1-2 of one frame: m (3, 3), fcg_sigmaf (4,) = [fcg (3), sigmaf] and
    grid (6,) = [nf1, nf2, df1, df2, offf1, offf2]. Returns a FRAME_* status (fcg is NaN unless the
    principal ray hits the ground; grid is set only for FRAME_OK)."""
    for k in range(4):
        fcg_sigmaf[k] = math.nan
    for k in range(6):
        if not math.isfinite(x[k]):
            return FRAME_NON_FINITE_STATE
    _world_to_camera_into(rotation, x, m)
    g0, g1, g2 = _ground_point(c[0], c[1], m, x, f, c)
    fcg_sigmaf[0], fcg_sigmaf[1], fcg_sigmaf[2] = g0, g1, g2
    if not (math.isfinite(g0) and math.isfinite(g1) and math.isfinite(g2)):
        return FRAME_NO_GROUND
    # pixel area of a person's square patch at fcg
    quad = np.empty((4, 2))
    all_visible = True
    for k in range(4):
        quad[k, 0], quad[k, 1], vis = _project_point(g0 + person_size_m * _UNIT_SQUARE_NE[k, 0],
                                                     g1 + person_size_m * _UNIT_SQUARE_NE[k, 1], g2,
                                                     m, x, f, c)
        all_visible = all_visible and vis
    if all_visible:
        sigmaf = _quad_area(quad)
        side_px = math.sqrt(sigmaf)
    else:  # closer than ~1.2 m: a person is larger than the image (QRSim's intended guard, spec 10.9)
        side_px = c[0] + c[1]
        sigmaf = 4.0 * (c[0] * c[1])
    fcg_sigmaf[3] = sigmaf
    nf1, nf2, df1, df2, off1, off2 = _window_grid(side_px, c[0], c[1], min_window_px)
    grid[0], grid[1], grid[2] = int(nf1), int(nf2), int(df1)
    grid[3], grid[4], grid[5] = int(df2), int(off1), int(off2)
    return FRAME_OK


@njit(f"void({_MAT_IN}, {_MAT_IN}, {_ROW_IN}, {_ROW_IN}, float64, float64, float64[:, :, ::1], "
      "float64[:, ::1], int64[:, ::1], int64[::1], int64[::1], int64[::1])")
def _frames_setup(xs, rotation, f, c, person_size_m, min_window_px, m, fcg_sigmaf, grids, status, w_start,
                  c_start):
    """``_frame_setup`` of every vehicle, and the first window and corner rows (V + 1,) of each frame."""
    w_start[0], c_start[0] = 0, 0
    for v in range(xs.shape[0]):
        status[v] = _frame_setup(xs[v], rotation, f, c, person_size_m, min_window_px, m[v], fcg_sigmaf[v],
                                 grids[v])
        n1, n2 = (grids[v, 0], grids[v, 1]) if status[v] == FRAME_OK else (0, 0)
        w_start[v + 1] = w_start[v] + n1 * n2
        c_start[v + 1] = c_start[v] + ((n1 + 1) * (n2 + 1) if status[v] == FRAME_OK else 0)


@njit(f"float64[:, ::1]({_MAT_IN}, {_ROW_IN}, {_ROW_IN}, int64, float64, float64, int64)")
def _pixel_terms(m, f, c, axis, offset, df, count):
    """Ray terms of ``count`` pixel coordinates ``p_k = offset + k df`` along image axis ``axis`` (0: u,
    1: v): rows [p_k, a m[axis, 0], a m[axis, 1], a m[axis, 2]] with a = (p_k - c) / f, the products of
    ``_ground_point`` (a grid's rays are sums of one column and one row term). The pixel coordinates
    of the grids are integers or halves: exact in any order of summation."""
    out = np.empty((count, 4))
    for k in range(count):
        p = offset + k * float(df)
        a = (p - c[axis]) / f[axis]
        out[k, 0], out[k, 1], out[k, 2], out[k, 3] = p, a * m[axis, 0], a * m[axis, 1], a * m[axis, 2]
    return out


@njit(f"int64({_CAM}, {_I8_1D_IN}, int64, int64, float64[:, ::1], float64[:, ::1], float64[:, ::1], "
      "float64[:, ::1], boolean[::1], float64[::1], float64[::1], float64[::1], float64[::1])")
def _window_geometry_rows(m, x, f, c, grid, w0, c0, corners_px, centres_px, corners_ned, centres_ned, valid,
                          range_m, inclination, sin_azimuth, cos_azimuth):
    """Spec 3.5 steps 2 and 5 of one frame with grid (6,) (see ``_frame_setup``): window corners/centres
    in pixels and on the ground, validity, and each window centre seen from the camera. Window (j, i) is
    row w0 + j nf2 + i of the window arrays, corner (j, i) row c0 + j (nf2 + 1) + i of the corner arrays.
    Returns the number of valid windows."""
    n1, n2, df1, df2, off1, off2 = grid[0], grid[1], grid[2], grid[3], grid[4], grid[5]
    m20, m21, m22 = m[2, 0], m[2, 1], m[2, 2]
    # corner (j, i) at offf + (j df1, i df2); centres half a window further
    cols = _pixel_terms(m, f, c, 0, float(off1), float(df1), n1 + 1)
    rows = _pixel_terms(m, f, c, 1, float(off2), float(df2), n2 + 1)
    for j in range(n1 + 1):
        for i in range(n2 + 1):
            k = c0 + j * (n2 + 1) + i
            corners_px[k, 0], corners_px[k, 1] = cols[j, 0], rows[i, 0]
            corners_ned[k, 0], corners_ned[k, 1], corners_ned[k, 2] = _ground_of_ray(
                cols[j, 1] + rows[i, 1] + m20, cols[j, 2] + rows[i, 2] + m21, cols[j, 3] + rows[i, 3] + m22,
                x)
    cols = _pixel_terms(m, f, c, 0, off1 + 0.5 * df1, float(df1), n1)
    rows = _pixel_terms(m, f, c, 1, off2 + 0.5 * df2, float(df2), n2)
    x0, x1, x2 = x[0], x[1], x[2]
    n_valid = 0
    for j in range(n1):
        for i in range(n2):
            k = w0 + j * n2 + i
            centres_px[k, 0], centres_px[k, 1] = cols[j, 0], rows[i, 0]
            g0, g1, g2 = _ground_of_ray(cols[j, 1] + rows[i, 1] + m20, cols[j, 2] + rows[i, 2] + m21,
                                        cols[j, 3] + rows[i, 3] + m22, x)
            centres_ned[k, 0], centres_ned[k, 1], centres_ned[k, 2] = g0, g1, g2
            t0, t1, t2 = x0 - g0, x1 - g1, x2 - g2  # tc = camera - window centre
            r = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
            range_m[k] = r
            cos_inc = -t2 / r
            if cos_inc > 1.0:
                cos_inc = 1.0
            elif cos_inc < -1.0:
                cos_inc = -1.0
            inclination[k] = cos_inc  # acos below, in a loop of its own (faster)
            ok = math.isfinite(g0)
            valid[k] = ok
            if ok:
                n_valid += 1
                h = math.sqrt(t0 * t0 + t1 * t1)
                if h > 0.0:  # sin and cos of atan2(t1, t0)
                    sin_azimuth[k], cos_azimuth[k] = t1 / h, t0 / h
                else:  # straight below
                    sin_azimuth[k], cos_azimuth[k] = 0.0, 1.0
            else:
                sin_azimuth[k], cos_azimuth[k] = math.nan, math.nan
    for k in range(w0, w0 + n1 * n2):
        inclination[k] = math.acos(inclination[k])
    return n_valid


@njit(f"int64({_MAT_IN}, {F8_3D_IN}, {_ROW_IN}, {_ROW_IN}, int64[:, ::1], int64[::1], int64[::1], "
      "int64[::1], float64[:, ::1], float64[:, ::1], float64[:, ::1], float64[:, ::1], boolean[::1], "
      "float64[::1], float64[::1], float64[::1], float64[::1])")
def _frames_geometry(xs, m, f, c, grids, status, w_start, c_start, corners_px, centres_px, corners_ned,
                     centres_ned, valid, range_m, inclination, sin_azimuth, cos_azimuth):
    n_valid = 0
    for v in range(xs.shape[0]):
        if status[v] == FRAME_OK:
            n_valid += _window_geometry_rows(m[v], xs[v], f, c, grids[v], w_start[v], c_start[v], corners_px,
                                             centres_px, corners_ned, centres_ned, valid, range_m,
                                             inclination, sin_azimuth, cos_azimuth)
    return n_valid


@njit(f"void({_MAT_IN}, float64, {_CAM}, {_I8_1D_IN}, int64, {_MAT_IN}, {_B1_IN}, int64[::1], float64[::1], "
      "float64[::1], boolean[::1])")
def _person_windows_rows(persons, side_m, m, x, f, c, grid, w0, centres_px, valid, person_index, distance_px,
                         area_px2, positive):
    """Spec 3.5 step 4 of one frame (see ``CameraGeometry.person_windows``); rows as in
    ``_window_geometry_rows``."""
    n1, n2, df1, df2, off1, off2 = grid[0], grid[1], grid[2], grid[3], grid[4], grid[5]
    w1 = w0 + n1 * n2
    for k in range(w0, w1):
        person_index[k] = -1
        distance_px[k] = math.nan
        area_px2[k] = math.nan
        positive[k] = False
    uv = np.empty((4, 2))
    vis = np.empty(4, np.bool_)
    marks = np.empty((9, 2))  # pixels that mark windows: centre, visible corners, side centroids
    for p in range(persons.shape[0]):
        p0, p1, p2 = persons[p, 0], persons[p, 1], persons[p, 2]
        cu, cv, seen = _project_point(p0, p1, p2, m, x, f, c)
        if not seen:  # a person counts iff its centre is in the image
            continue
        n_vis = 0
        half_sum = 0.0
        for k in range(4):
            uv[k, 0], uv[k, 1], vis[k] = _project_point(p0 + side_m * _UNIT_SQUARE_NE[k, 0],
                                                        p1 + side_m * _UNIT_SQUARE_NE[k, 1], p2, m, x, f, c)
            if vis[k]:
                n_vis += 1
                du, dv = uv[k, 0] - cu, uv[k, 1] - cv
                half_sum += math.sqrt(du * du + dv * dv)
        # pixel area: exact quadrilateral if all 4 corners are visible, else a square with the mean
        # visible half-diagonal; no corner visible (person larger than the image): the whole image
        if n_vis == 4:
            sigma = _quad_area(uv)
        elif n_vis > 0:
            mean_half = half_sum / n_vis
            sigma = 2.0 * (mean_half * mean_half)
        else:
            sigma = 4.0 * (c[0] * c[1])
        marks[0, 0], marks[0, 1] = cu, cv
        n_marks = 1
        for k in range(4):
            if vis[k]:
                marks[n_marks, 0], marks[n_marks, 1] = uv[k, 0], uv[k, 1]
                n_marks += 1
        for s in range(4):
            a, b = _SIDE_PAIRS[s, 0], _SIDE_PAIRS[s, 1]
            if vis[a] and vis[b]:
                marks[n_marks, 0] = (uv[a, 0] + uv[b, 0] + cu) / 3.0
                marks[n_marks, 1] = (uv[a, 1] + uv[b, 1] + cv) / 3.0
                n_marks += 1
        # a window sees the person whose pixel centre is nearest to the window centre (ties: first
        # person): QRSim's sequential "replace only if strictly nearer"
        for k in range(n_marks):
            j = _window_index(marks[k, 0], float(off1), float(df1), n1)
            i = _window_index(marks[k, 1], float(off2), float(df2), n2)
            w = w0 + j * n2 + i
            du, dv = centres_px[w, 0] - cu, centres_px[w, 1] - cv
            d = math.sqrt(du * du + dv * dv)
            if person_index[w] < 0 or d < distance_px[w]:
                person_index[w] = p
                distance_px[w] = d
                area_px2[w] = sigma
    # a window whose centre misses the ground has no range, hence no score model: nobody is seen there
    for k in range(w0, w1):
        if person_index[k] >= 0:
            if valid[k]:
                positive[k] = True
            else:
                person_index[k] = -1
                distance_px[k] = math.nan
                area_px2[k] = math.nan


@njit(f"void({_MAT_IN}, float64, {F8_3D_IN}, {_MAT_IN}, {_ROW_IN}, {_ROW_IN}, int64[:, ::1], int64[::1], "
      f"int64[::1], {_MAT_IN}, {_B1_IN}, int64[::1], float64[::1], float64[::1], boolean[::1])")
def _frames_person_windows(persons, side_m, m, xs, f, c, grids, status, w_start, centres_px, valid,
                           person_index, distance_px, area_px2, positive):
    for v in range(xs.shape[0]):
        if status[v] == FRAME_OK:
            _person_windows_rows(persons, side_m, m[v], xs[v], f, c, grids[v], w_start[v], centres_px, valid,
                                 person_index, distance_px, area_px2, positive)


@dataclass(eq=False)
class FrameBatch:
    """Geometry of the frames of V vehicles (spec 3.5 update steps 1, 2 and 5), ``CameraGeometry.frames``.

    Per vehicle v: status[v] (FRAME_*), m[v] NED -> camera rotation (3, 3), fcg[v] principal ground point
    (NaN if none), sigmaf[v] reference pixel area [px^2], grids[v] = [nf1, nf2, df1, df2, offf1, offf2].
    The windows of all frames are stacked: frame v's window (j, i) is row w_start[v] + j nf2 + i of the
    window arrays (W rows), its corner (j, i) row c_start[v] + j (nf2 + 1) + i of the corner arrays
    (frames without a grid have no rows).
    """

    status: NDArray[np.int64]
    m: Array
    fcg: Array
    sigmaf: Array
    grids: NDArray[np.int64]
    w_start: NDArray[np.int64]  # (V + 1,)
    c_start: NDArray[np.int64]  # (V + 1,)
    corners_px: Array  # (C, 2)
    centres_px: Array  # (W, 2)
    corners_ned: Array  # (C, 3)
    centres_ned: Array  # (W, 3)
    valid: NDArray[np.bool_]  # (W,) the window centre's ray meets the ground
    range_m: Array  # (W,) |tc|, tc = camera - window centre
    inclination_rad: Array  # (W,) acos(-tc_z / |tc|)
    sin_azimuth: Array  # (W,) tc_y / |tc_xy| (0 straight below), NaN where invalid
    cos_azimuth: Array  # (W,) tc_x / |tc_xy| (1 straight below), NaN where invalid
    n_valid: int  # number of valid windows


class CameraGeometry:
    """Projection NED -> pixels and back onto the ground for one camera model.

    f_px: (2,) focal lengths [px]; c_px: (2,) principal point [px]; r_body_rad: (3,) camera mounting
    Euler angles [rad] (QRSim's ``r``).
    """

    def __init__(self, f_px: ArrayLike, c_px: ArrayLike, r_body_rad: ArrayLike) -> None:
        self.f_px = np.ascontiguousarray(np.asarray(f_px, float).reshape(2))
        self.c_px = np.ascontiguousarray(np.asarray(c_px, float).reshape(2))
        #: Body -> camera rotation (3, 3).
        self.rotation = np.ascontiguousarray(camera_rotation(r_body_rad))

    @property
    def image_size_px(self) -> Array:
        """Sensor size 2c [px] (width along u, height along v)."""
        return 2.0 * self.c_px

    @property
    def fov_rad(self) -> Array:
        """Full fields of view (2,) [rad] along u and v: 2 atan(c / f)."""
        return 2.0 * np.arctan(self.c_px / self.f_px)

    @staticmethod
    def _state(x: ArrayLike) -> Array:
        x = np.asarray(x, float)
        if x.ndim != 1 or x.size < 6:
            raise ValueError(f"x must be one state of shape (13,) (at least 6 elements), got {x.shape}")
        return x

    def world_to_camera(self, x: ArrayLike) -> tuple[Array, Array]:
        """(M, tp): rotation NED -> camera ``R @ dcm(x)`` (3, 3) and camera position ``x[0:3]`` (NED, m)."""
        x = self._state(x)
        m = np.empty((3, 3))
        _world_to_camera_into(self.rotation, x, m)
        return m, x[STATE_POSITION_NED].copy()

    def project(self, points_ned: ArrayLike, x: ArrayLike) -> tuple[Array, NDArray[np.bool_]]:
        """Project NED points (M, 3) into the image of the vehicle in state ``x`` (spec ``cam_prj``).

        ``p3 = R Rp (P - tp)``; a point is visible iff ``p3_z > 0`` (in front of the camera; QRSim lets
        ``p3_z == 0`` through to a division by zero) and its pixel lies in ``[0, 2c]``.
        Returns ``uv`` (M, 2) [px], NaN where not visible, and ``visible`` (M,).
        """
        x = self._state(x)
        m, _ = self.world_to_camera(x)
        points = np.asarray(points_ned, float).reshape(-1, 3)
        uv, visible = np.empty((len(points), 2)), np.empty(len(points), bool)
        _project_rows(points, m, x, self.f_px, self.c_px, uv, visible)
        return uv, visible

    def ground_intersection(self, uv_px: ArrayLike, x: ArrayLike) -> Array:
        """Ground points (M, 3) where the rays through pixels ``uv`` (M, 2) meet z = 0 (``inv_cam_prjZ0``).

        The ray direction in NED is ``Rp^T R^T [(uv - c) / f, 1]``. Rays that do not reach the ground
        in front of the camera (parallel or pointing up, or a camera at or below the ground) give NaN;
        QRSim returned the intersection behind the camera there.
        """
        x = self._state(x)
        m, _ = self.world_to_camera(x)
        uv = np.asarray(uv_px, float).reshape(-1, 2)
        out = np.empty((len(uv), 3))
        _ground_rows(uv, m, x, self.f_px, self.c_px, out)
        return out

    # --- frames (spec 3.5 update steps 1, 2, 4, 5) of many vehicles at once, for CameraWithClassifier ---

    def frames(self, xs: ArrayLike, person_size_m: float, min_window_px: float) -> FrameBatch:
        """Steps 1, 2 and 5 for vehicles in states ``xs`` (V, >= 6): principal ground point, reference
        person area, window grid, and every window's pixel and ground geometry (see ``FrameBatch``).

        ``person_size_m`` is the side of a person's square patch [m]; ``min_window_px`` the smallest
        window side [px]. A window is valid iff its centre ray meets the ground; invalid windows have NaN
        ground geometry, range, inclination and azimuth.
        """
        xs = np.asarray(xs, float)
        if xs.ndim != 2 or xs.shape[1] < 6:
            raise ValueError(f"xs must have shape (V, 13) (at least 6 columns), got {xs.shape}")
        nv = xs.shape[0]
        m, fcg_sigmaf = np.empty((nv, 3, 3)), np.empty((nv, 4))
        grids, status = np.zeros((nv, 6), np.int64), np.empty(nv, np.int64)
        w_start, c_start = np.empty(nv + 1, np.int64), np.empty(nv + 1, np.int64)
        _frames_setup(xs, self.rotation, self.f_px, self.c_px, float(person_size_m), float(min_window_px), m,
                      fcg_sigmaf, grids, status, w_start, c_start)
        nw, nc = int(w_start[-1]), int(c_start[-1])
        batch = FrameBatch(
            status=status, m=m, fcg=fcg_sigmaf[:, :3], sigmaf=fcg_sigmaf[:, 3], grids=grids, w_start=w_start,
            c_start=c_start, corners_px=np.empty((nc, 2)), centres_px=np.empty((nw, 2)),
            corners_ned=np.empty((nc, 3)), centres_ned=np.empty((nw, 3)), valid=np.empty(nw, bool),
            range_m=np.empty(nw), inclination_rad=np.empty(nw), sin_azimuth=np.empty(nw),
            cos_azimuth=np.empty(nw), n_valid=0,
        )
        batch.n_valid = int(_frames_geometry(
            xs, m, self.f_px, self.c_px, grids, status, w_start, c_start, batch.corners_px, batch.centres_px,
            batch.corners_ned, batch.centres_ned, batch.valid, batch.range_m, batch.inclination_rad,
            batch.sin_azimuth, batch.cos_azimuth))
        return batch

    def person_windows(
        self, batch: FrameBatch, xs: ArrayLike, persons_ned: ArrayLike, side_m: float
    ) -> tuple[NDArray[np.int64], Array, Array, NDArray[np.bool_]]:
        """Step 4 for the frames of ``batch`` (made from ``xs``): which window sees which person.

        Returns (person_index, distance_px, area_px2, positive), each (W,) in the batch's window rows:
        index into ``persons_ned`` (P, 3) (-1 = none), pixel distance window centre -> person centre
        and the person's pixel area (NaN where none), and person_index >= 0.

        A person counts iff its centre is in the image; it marks the windows holding its centre, its
        visible corners and the centroids (corner a + corner b + centre) / 3 of its sides with both
        corners visible; a window sees the person whose pixel centre is nearest to the window centre
        (ties: first person), and nobody if the window is invalid. Pixel area: the exact quadrilateral
        if all 4 corners are visible, else (sqrt(2) mean visible half-diagonal)^2, else 4 c1 c2. Pixels
        map to windows by ``WindowGrid.window_of``.
        """
        persons = np.asarray(persons_ned, float).reshape(-1, 3)
        nw = batch.valid.size
        person_index, positive = np.empty(nw, np.int64), np.empty(nw, bool)
        d_px, area_px2 = np.empty(nw), np.empty(nw)
        _frames_person_windows(persons, float(side_m), batch.m, np.asarray(xs, float), self.f_px, self.c_px,
                               batch.grids, batch.status, batch.w_start, batch.centres_px, batch.valid,
                               person_index, d_px, area_px2, positive)
        return person_index, d_px, area_px2, positive


@dataclass(frozen=True)
class WindowGrid:
    """Grid of classifier windows over the image (spec 3.5 update step 2).

    nf: windows along (u, v) (QRSim's ``gridDims``); df: window side [px]; offf: offset of the grid [px].
    Window (j, i) (0-based, j along u, i along v) spans ``offf + [j df1, (j+1) df1] x [i df2, (i+1) df2]``.
    """

    nf: tuple[int, int]
    df: tuple[int, int]
    offf: tuple[int, int]

    @classmethod
    def from_window_side(cls, side_px: float, c_px: ArrayLike, min_side_px: float) -> WindowGrid:
        """QRSim's grid for a projected person of side ``side_px``: nf = round(2c / side),
        df = floor(2c / nf), offf = floor(rem(2c, df) / 2). ``side_px`` is first raised to ``min_side_px``
        (caps the grid size).
        """
        c = np.asarray(c_px, float).reshape(2)
        nf1, nf2, df1, df2, o1, o2 = _window_grid(float(side_px), float(c[0]), float(c[1]),
                                                  float(min_side_px))
        return cls(nf=(int(nf1), int(nf2)), df=(int(df1), int(df2)), offf=(int(o1), int(o2)))

    @property
    def num_windows(self) -> int:
        return self.nf[0] * self.nf[1]

    def corners_px(self) -> Array:
        """Window corners (nf1+1, nf2+1, 2) [px]: corner (j, i) = offf + (j df1, i df2)."""
        j = np.arange(self.nf[0] + 1, dtype=float)[:, None]
        i = np.arange(self.nf[1] + 1, dtype=float)[None, :]
        u = np.broadcast_to(self.offf[0] + j * self.df[0], (self.nf[0] + 1, self.nf[1] + 1))
        v = np.broadcast_to(self.offf[1] + i * self.df[1], (self.nf[0] + 1, self.nf[1] + 1))
        return np.stack([u, v], axis=-1)

    def centres_px(self) -> Array:
        """Window centres (nf1, nf2, 2) [px]: offf + df / 2 + (j df1, i df2)."""
        return self.corners_px()[:-1, :-1] + 0.5 * np.asarray(self.df, float)

    def window_of(self, uv_px: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """0-based window indices (j, i) of in-image pixels (M, 2): QRSim's ``ceil((uv - offf) / df)``
        (1-based) with each index clamped to its own axis' range (QRSim clamped the wrong element, spec 10.9):
        pixels in the margins left by ``offf`` belong to the nearest border window.
        """
        uv = np.asarray(uv_px, float).reshape(-1, 2)
        j, i = np.empty(len(uv), np.int64), np.empty(len(uv), np.int64)
        _window_index_rows(uv, *self.nf, *self.df, *self.offf, j, i)
        return j, i
