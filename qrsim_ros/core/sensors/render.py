"""Shading of camera rays that were cast into the 3-D scene (beyond QRSim; docs/CAMERAS.md): colours from
what each ray hit, in compiled kernels (``qrsim_ros.core.common.jit``).

Per ray, given the first hit (``RayHits``: range, face, face normal facing the ray) and the scene's face
labels:

- ground: the colour of the terrain class under the hit point (the search-and-rescue area's classes,
  ``CLASS_COLOURS``; class 0 without an area) times a seeded procedural texture, times Lambert shading;
  a calibration target painted there replaces the colour by its checkerboard;
- obstacles and persons: a colour per label (``LABEL_COLOURS``; persons in high-visibility orange),
  a faint texture on obstacles, Lambert shading;
- no hit: a sky gradient from the horizon to the zenith.

Lambert shading: ``ambient + (1 - ambient) max(0, n . s)`` with the face normal n and the unit vector
s towards the sun (``SUN_TOWARDS_NED``: 55 degrees up, from the south-south-east). There are no cast
shadows (each would need a second ray). Far surfaces fade into the horizon colour (aerial
perspective, ``1 - exp(-range / HAZE_M)``).

Texture (what feature trackers need: FAST/ORB corners and gradients at every scale a vehicle at 10-40 m
sees): a seeded sum of value-noise octaves (cells of 16, 4 and 1 m, smooth), of two layers of
random-brightness patches with sharp edges (cells of 2 m and 0.6 m, each grid turned by its own angle, so
corners are not aligned between layers) and of two layers of round spots, stones and tufts (cells of
0.9 and 0.25 m). Every layer fades to its mean where its cells shrink below about two pixel footprints
(the ray's range times the pixel's angle over the incidence cosine): a mip-map done analytically, so
distant ground does not shimmer from frame to frame. The checkerboard of
a calibration target is box-filtered over the pixel footprint in the same way, so its corners are
located to a fraction of a pixel. Everything is a function of the hit point and the seed: the same
ground looks the same from every camera, vehicle and episode of a seed.

Colours are linear values in 0..255 ("DN") before the exposure gain, noise and quantisation.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, njit

#: Unit vector towards the sun in NED (elevation 55 degrees, azimuth 160 degrees from north).
_SUN_EL, _SUN_AZ = math.radians(55.0), math.radians(160.0)
SUN_TOWARDS_NED = np.array([math.cos(_SUN_EL) * math.cos(_SUN_AZ), math.cos(_SUN_EL) * math.sin(_SUN_AZ),
                            -math.sin(_SUN_EL)])
#: Share of light that reaches faces turned away from the sun.
AMBIENT = 0.4
#: Distance over which surfaces fade into the horizon colour [m] (1 - 1/e of the way).
HAZE_M = 900.0
#: Sky colours at the horizon and at the zenith [DN].
SKY_HORIZON = np.array([205.0, 215.0, 228.0])
SKY_ZENITH = np.array([85.0, 130.0, 205.0])
#: Colour of terrain class c: grass (background), brush (clutter), forest (occlusion), then more.
CLASS_COLOURS = np.array([[95.0, 140.0, 62.0], [150.0, 128.0, 82.0], [48.0, 88.0, 50.0],
                          [128.0, 124.0, 104.0], [170.0, 158.0, 118.0], [78.0, 110.0, 92.0]])
#: Colour of each scene label (core.world.scene.LABELS order: ground, box, cylinder, building, person).
LABEL_COLOURS = np.array([[95.0, 140.0, 62.0], [150.0, 150.0, 165.0], [112.0, 82.0, 56.0],
                          [188.0, 178.0, 162.0], [250.0, 110.0, 15.0]])
#: Label indices the kernel tells apart (as core.world.scene).
GROUND_LABEL, PERSON_LABEL = 0, 4
#: The checkerboard's black and white [DN].
TARGET_BLACK, TARGET_WHITE = 18.0, 235.0

_U32 = 0xFFFFFFFF


@njit("int64(int64, int64, int64)")
def _hash32(ix, iy, seed):
    """A uniform 32-bit integer from two lattice indices and a seed (an integer hash in 32-bit
    arithmetic that Python and numba evaluate identically)."""
    h = (ix * 374761393 + iy * 668265263 + seed * 2246822519) & _U32
    h = ((h ^ (h >> 13)) * 1274126177) & _U32
    return (h ^ (h >> 16)) & _U32


@njit("float64(int64, int64, int64)")
def _hash01(ix, iy, seed):
    """A uniform number in [0, 1) from two lattice indices and a seed (``_hash32`` / 2^32)."""
    return _hash32(ix, iy, seed) / 4294967296.0


@njit("float64(float64, float64, int64)")
def _value_noise(x, y, seed):
    """Smooth value noise in [0, 1) at (x, y) in cell units (smoothstep-weighted lattice values)."""
    fx, fy = math.floor(x), math.floor(y)
    ix, iy = int(fx), int(fy)
    tx, ty = x - fx, y - fy
    sx, sy = tx * tx * (3.0 - 2.0 * tx), ty * ty * (3.0 - 2.0 * ty)
    a = _hash01(ix, iy, seed)
    b = _hash01(ix + 1, iy, seed)
    c = _hash01(ix, iy + 1, seed)
    d = _hash01(ix + 1, iy + 1, seed)
    return a + (b - a) * sx + (c - a) * sy + (a - b - c + d) * sx * sy


@njit("float64(float64, float64)")
def _lod(cell_m, footprint_m):
    """Weight of a texture layer of cells ``cell_m`` seen with pixels of ``footprint_m``: 1 down to
    4 footprints per cell, 0 at 2 and below (the layer is replaced by its mean)."""
    return min(max(cell_m / (2.0 * footprint_m) - 1.0, 0.0), 1.0)


@njit("float64(float64, float64, float64, float64, float64, float64, int64)")
def _patches(n, e, footprint_m, cell_m, amplitude, angle_rad, seed):
    """One layer of square patches of side ``cell_m`` on a grid turned by ``angle_rad``, each of a random
    brightness in +-amplitude (faded with the pixel footprint)."""
    w = _lod(cell_m, footprint_m)
    if w == 0.0:
        return 0.0
    c, s = math.cos(angle_rad), math.sin(angle_rad)
    u = math.floor((c * n + s * e) / cell_m)
    v = math.floor((-s * n + c * e) / cell_m)
    return amplitude * w * (2.0 * _hash01(int(u), int(v), seed) - 1.0)


@njit("float64(float64, float64, float64, float64, float64, int64)")
def _spots(n, e, footprint_m, cell_m, amplitude, seed):
    """Round spots (stones, tufts): in every cell of a ``cell_m`` grid, with probability 0.7, a disc of
    radius 0.12..0.38 cells at a random place in the cell's middle half, of a random brightness in
    +-amplitude; its rim blurred over one pixel footprint (anti-aliased), faded with the footprint."""
    w = _lod(cell_m, footprint_m)
    if w == 0.0:
        return 0.0
    u, v = n / cell_m, e / cell_m
    iu, iv = math.floor(u), math.floor(v)
    i, j = int(iu), int(iv)
    h = _hash32(i, j, seed)  # four bytes: presence, place along u, place along v, radius
    present = 1.0 if (h & 255) < 179 else 0.0  # 70 % (arithmetic rather than branches: they mispredict)
    du = u - (iu + 0.25 + 0.5 * ((h >> 8) & 255) / 256.0)
    dv = v - (iv + 0.25 + 0.5 * ((h >> 16) & 255) / 256.0)
    radius = 0.12 + 0.26 * ((h >> 24) & 255) / 256.0
    edge = max(footprint_m / cell_m, 1e-6)
    cover = min(max((radius - math.sqrt(du * du + dv * dv)) / edge + 0.5, 0.0), 1.0)
    return present * amplitude * w * cover * (2.0 * _hash01(i, j, seed + 1) - 1.0)


@njit("float64(float64, float64, float64, int64)")
def ground_texture(n, e, footprint_m, seed):
    """Brightness factor (about 0.3..1.7, mean 1) of the ground at north/east (n, e) [m] (module
    docstring): three value-noise octaves, two layers of sharp-edged patches and two of spots."""
    f = 1.0
    cell, amp = 16.0, 0.25
    for k in range(3):  # 16, 4, 1 m
        w = _lod(cell, footprint_m)
        if w > 0.0:
            f += amp * w * (2.0 * _value_noise(n / cell, e / cell, seed + 101 * k) - 1.0)
        cell *= 0.25
        amp *= 0.8
    # patches on rotated grids (edges and corners at two scales), then spots (blob corners)
    f += _patches(n, e, footprint_m, 2.0, 0.15, 0.5235987755982988, seed + 7919)
    f += _patches(n, e, footprint_m, 0.6, 0.12, 1.1344640137963142, seed + 15838)
    f += _spots(n, e, footprint_m, 0.9, 0.4, seed + 23757)
    f += _spots(n, e, footprint_m, 0.25, 0.3, seed + 31676)
    return max(f, 0.05)


@njit("float64(float64, float64)")
def _box_filtered_square_wave(p, w):
    """The square wave +1 on [2m, 2m + 1), -1 on [2m + 1, 2m + 2), averaged over [p - w/2, p + w/2]."""
    a = (p - 0.5 * w) * 0.5
    b = (p + 0.5 * w) * 0.5
    return 2.0 * (abs(a - math.floor(a) - 0.5) - abs(b - math.floor(b) - 0.5)) / w


@njit(f"float64(float64, float64, float64, {F8_2D_IN})")
def target_shade(n, e, footprint_m, targets):
    """Brightness [DN] of the calibration targets (rows of ``CalibrationTargetParams.packed``) at (n, e),
    or -1 where there is none. The checkerboard is box-filtered over the pixel footprint."""
    for t in range(targets.shape[0]):
        dn, de = n - targets[t, 0], e - targets[t, 1]
        c, s, sq = targets[t, 2], targets[t, 3], targets[t, 4]
        n0, n1, border = targets[t, 5], targets[t, 6], targets[t, 7]
        a = (c * dn + s * de) / sq + 0.5 * n0  # in squares from the board's corner
        b = (-s * dn + c * de) / sq + 0.5 * n1
        if a < -border or b < -border or a > n0 + border or b > n1 + border:
            continue
        if a < 0.0 or b < 0.0 or a > n0 or b > n1:
            return TARGET_WHITE
        w = max(footprint_m / sq, 1e-6)
        white = 0.5 - 0.5 * _box_filtered_square_wave(a, w) * _box_filtered_square_wave(b, w)
        return TARGET_BLACK + (TARGET_WHITE - TARGET_BLACK) * min(max(white, 0.0), 1.0)
    return -1.0


_SHADE_SIG = (
    f"void(int64[::1], float64[::1], float64[:, ::1], {F8_2D_IN}, float64[:, ::1], float64[::1], "
    "Array(int8, 1, 'A', readonly=True), Array(int64, 2, 'A', readonly=True), float64, float64, "
    f"{F8_2D_IN}, {F8_2D_IN}, {F8_2D_IN}, {F8_1D_IN}, float64, int64, float32[:, ::1])"
)


@njit(_SHADE_SIG)
def shade(face, range_m, normal, origin, direction, pixel_angle_rad, face_label, terrain, terrain_n0,
          terrain_e0, class_colours, label_colours, targets, sun, gain, seed, out):
    """Colours [DN] of M cast rays into ``out`` (M, 3) (module docstring).

    face, range_m, normal: the hits (``RayHits``: face -1 where nothing was hit); origin, direction: the
    rays (M, 3) NED (unit directions); pixel_angle_rad: the angle a ray's pixel spans [rad];
    face_label: the scene label of every face; terrain: terrain classes (rows north, columns east, 1 m
    cells) whose first cell's corner is at (terrain_n0, terrain_e0) (a 1 x 1 grid of 0 without an
    area); class_colours, label_colours: (K, 3), (5, 3) [DN]; targets: calibration target rows; sun:
    unit vector towards the sun (NED); gain: exposure gain; seed: the texture's seed.
    """
    rows, cols = terrain.shape[0], terrain.shape[1]
    n_classes = class_colours.shape[0]
    for m in range(face.shape[0]):
        d0, d1, d2 = direction[m, 0], direction[m, 1], direction[m, 2]
        f = face[m]
        if f < 0:  # the sky: from the horizon colour to the zenith colour with the ray's elevation
            t = min(max(-d2, 0.0), 1.0)
            for ch in range(3):
                out[m, ch] = gain * (SKY_HORIZON[ch] + (SKY_ZENITH[ch] - SKY_HORIZON[ch]) * t)
            continue
        r = range_m[m]
        n0, n1, n2 = normal[m, 0], normal[m, 1], normal[m, 2]
        cos_in = abs(d0 * n0 + d1 * n1 + d2 * n2)
        footprint = r * pixel_angle_rad[m] / max(cos_in, 0.05)
        light = AMBIENT + (1.0 - AMBIENT) * max(n0 * sun[0] + n1 * sun[1] + n2 * sun[2], 0.0)
        pn, pe, pd = origin[m, 0] + r * d0, origin[m, 1] + r * d1, origin[m, 2] + r * d2
        label = face_label[f]
        c0 = c1 = c2 = 0.0
        if label == GROUND_LABEL:
            grey = target_shade(pn, pe, footprint, targets)
            if grey >= 0.0:
                c0 = c1 = c2 = grey * light
            else:
                i = min(max(math.ceil(pn - terrain_n0) - 1, 0), rows - 1)  # as PourTerrain.cell_of
                j = min(max(math.ceil(pe - terrain_e0) - 1, 0), cols - 1)
                k = terrain[i, j] % n_classes
                tex = ground_texture(pn, pe, footprint, seed) * light
                c0, c1, c2 = class_colours[k, 0] * tex, class_colours[k, 1] * tex, class_colours[k, 2] * tex
        else:
            tex = light
            if label != PERSON_LABEL:  # obstacles: faint texture on the two axes along the face
                if abs(n2) > 0.7:
                    a, b = pn, pe
                elif abs(n0) > abs(n1):
                    a, b = pe, pd
                else:
                    a, b = pn, pd
                tex *= 0.85 + 0.3 * _value_noise(a, b, seed + 31) * _lod(1.0, footprint) \
                    + 0.15 * (1.0 - _lod(1.0, footprint))
            c0 = label_colours[label, 0] * tex
            c1 = label_colours[label, 1] * tex
            c2 = label_colours[label, 2] * tex
        haze = 1.0 - math.exp(-r / HAZE_M)
        out[m, 0] = gain * (c0 + (SKY_HORIZON[0] - c0) * haze)
        out[m, 1] = gain * (c1 + (SKY_HORIZON[1] - c1) * haze)
        out[m, 2] = gain * (c2 + (SKY_HORIZON[2] - c2) * haze)


@functools.cache
def normal_quantiles(bits: int = 16) -> NDArray[np.float32]:
    """The standard normal's quantiles at the midpoints of 2^bits equal-probability bins: a table that
    turns uniform ``bits``-bit integers into standard normals by the inverse CDF (the tails beyond
    about 4.2 sigma for 16 bits are cut: immaterial for pixel noise quantised to 8 bits). Computed on
    first use (scipy.special costs a node process about 0.3 s to import) and shared, read-only."""
    from scipy.special import ndtri

    k = np.arange(2**bits, dtype=float)
    table = ndtri((k + 0.5) / 2**bits).astype(np.float32)
    table.flags.writeable = False
    return table


@njit("float64(float32[:, ::1], int64, int64, boolean)")
def _channel(linear, m, ch, mono):
    if mono:
        return 0.299 * linear[m, 0] + 0.587 * linear[m, 1] + 0.114 * linear[m, 2]
    return linear[m, ch]


@njit("void(float32[:, ::1], Array(int64, 1, 'A', readonly=True), Array(int64, 1, 'A', readonly=True), "
      "Array(uint16, 2, 'A', readonly=True), Array(float32, 1, 'A', readonly=True), float64, boolean, "
      "uint8[:, ::1])")
def quantise(linear, pixels, background, noise_bits, quantiles, sigma, mono, out):
    """The image ``out`` (H * W, 3) (rgb8) or (H * W, 1) (mono8) [DN]: pixel ``pixels[m]`` takes the linear
    colour ``linear[m]`` (M, 3), the ``background`` pixels (those without a ray) are black; luminance
    (ITU-R BT.601 weights) for mono8; plus ``sigma`` times the standard normals
    ``quantiles[noise_bits]`` (noise_bits: uniform integers (H * W, channels), or an empty array for no
    noise); rounded and clipped to 0..255."""
    noisy = noise_bits.shape[0] > 0
    channels = out.shape[1]
    for p in background:
        for ch in range(channels):
            v = sigma * quantiles[noise_bits[p, ch]] if noisy else 0.0
            out[p, ch] = np.uint8(min(max(math.floor(v + 0.5), 0.0), 255.0))
    for m in range(pixels.shape[0]):
        p = pixels[m]
        for ch in range(channels):
            v = _channel(linear, m, ch, mono)
            if noisy:
                v += sigma * quantiles[noise_bits[p, ch]]
            out[p, ch] = np.uint8(min(max(math.floor(v + 0.5), 0.0), 255.0))
