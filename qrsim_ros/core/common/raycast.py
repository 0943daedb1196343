"""First-hit ray casting against a triangle mesh, through Embree 4: a BVH built once per geometry,
queried with batches of rays in Embree's ray packets.

Every scene sensor (lidar, range finders, cameras, depth) asks one question: along these rays, what is
hit first, how far, and with which face normal. Frames are the caller's (the scene is in NED); ranges
are in metres along unit directions.

Why Embree and not Open3D's ``RaycastingScene`` (both measured on this machine, docs/SCENE.md): Open3D's
wheel is 400 MB (105 MB for ``open3d-cpu``) and needs system libraries that are not on a fresh machine
of this kind (``libusb-1.0``, ``libudev``, ``libEGL``, ``libGL``, ``libX11``), so a clean clone could not
import it. Embree comes in the 14 MB self-contained ``embreex`` wheel.

Why Embree's C API through ``ctypes`` and not ``embreex``'s Python calls: embreex binds only Embree's
single-ray query, one ray after another. Embree's packet queries (``rtcIntersect4/8/16``) trace 4 to 16
neighbouring rays together with SIMD instructions and are about twice as fast for a camera's or a
lidar's coherent rays (measured: docs/SCENE.md, scripts/bench_scene.py). So this module declares the
dozen Embree 4 functions it needs against the library inside the embreex wheel (``embreex.libs``), and
one kernel fills the packets, traces them and writes ranges, faces and normals in one pass (compiled
with numba and cached like every kernel: the Embree function is its argument, ``jit.foreign_function``;
without numba the same loop runs in Python, slowly). The packet layout is
Embree 4's ``RTCRayHitN`` (``rtcore_ray.h``): structure-of-arrays fields of N lanes each, the ray's
twelve, then the hit's; the library's version and native packet widths are checked when it is loaded.

Embree works in single precision: a range is exact to about 1e-7 of the distance travelled from the
origin (1 mm at 10 km); origins are given relative to ``offset_ned`` (the scene's centre) to keep them
small.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import weakref
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, foreign_function, njit

#: Embree's "no hit" primitive/geometry id.
NO_HIT = -1


@dataclass(frozen=True)
class RayHits:
    """The first hits of M rays.

    range_m: distance along each unit direction [m], +inf where nothing is hit within the range.
    face: index of the triangle hit (M,), NO_HIT where nothing is hit.
    normal: unit normal of the triangle hit (M, 3), facing the ray's origin; zeros where nothing is hit.
    """

    range_m: Array
    face: NDArray[np.int64]
    normal: Array

    @property
    def hit(self) -> NDArray[np.bool_]:
        return self.face != NO_HIT

    def points(self, origins: ArrayLike, directions: ArrayLike) -> Array:
        """Hit points (M, 3) in the rays' frame; NaN where nothing is hit."""
        o = np.asarray(origins, float)
        d = np.asarray(directions, float)
        r = np.where(self.hit, self.range_m, np.nan)
        return o + d * r[:, None]


class RayCaster:
    """Embree BVH over a triangle mesh (vertices (V, 3), faces (F, 3) of vertex indices).

    ``offset`` is subtracted from the vertices and from every ray origin (single-precision accuracy near
    the scene's centre). The mesh is fixed; build a new caster when the geometry changes (a BVH of a
    few ten thousand triangles takes milliseconds).
    """

    def __init__(self, vertices: ArrayLike, faces: ArrayLike, offset: ArrayLike | None = None) -> None:
        v = np.asarray(vertices, float)
        f = np.asarray(faces, np.int64)
        if v.ndim != 2 or v.shape[1] != 3 or f.ndim != 2 or f.shape[1] != 3:
            raise ValueError(f"a mesh needs vertices (V, 3) and faces (F, 3), got {v.shape} and {f.shape}")
        if len(f) and (f.min() < 0 or f.max() >= len(v)):
            raise ValueError("a face refers to a vertex that does not exist")
        if not np.all(np.isfinite(v)):
            raise ValueError("mesh vertices must be finite")
        self.offset = np.zeros(3) if offset is None else np.asarray(offset, float).reshape(3)
        self.num_faces = len(f)
        self._normals = _unit_normals(v[f])
        self._embree = embree()
        self._scene = self._embree.triangle_scene(v - self.offset, f) if len(f) else None

    @property
    def face_normals(self) -> Array:
        """Unit normal of every face (F, 3) (right-handed vertex order)."""
        return self._normals.copy()

    def cast(self, origins: ArrayLike, directions: ArrayLike, max_range_m: float = np.inf) -> RayHits:
        """First hits of rays from ``origins`` (M, 3) along unit ``directions`` (M, 3), up to
        ``max_range_m`` [m] (beyond it: no hit). Neighbouring rays should be neighbours in the arrays
        (as a scan's or an image's are): they are traced in packets."""
        o = np.asarray(origins, float).reshape(-1, 3)
        d = np.asarray(directions, float).reshape(-1, 3)
        if o.shape != d.shape:
            raise ValueError(f"origins {o.shape} and directions {d.shape} differ")
        m = len(d)
        rng = np.full(m, np.inf)
        face = np.full(m, NO_HIT, np.int64)
        normal = np.zeros((m, 3))
        if m and self._scene is not None:
            self._embree.cast(self._scene, o, d, self.offset, float(max_range_m), self._normals, rng, face,
                              normal)
        return RayHits(rng, face, normal)


# --- Embree 4 through ctypes ---------------------------------------------------------------------------

#: Embree 4 constants used here (rtcore_device.h, rtcore_buffer.h, rtcore_geometry.h, rtcore_common.h).
_DEVICE_PROPERTY_VERSION_MAJOR = 1
_DEVICE_PROPERTY_NATIVE_RAY_SUPPORTED = {4: 32, 8: 33, 16: 34}
_GEOMETRY_TYPE_TRIANGLE = 0
_SCENE_FLAG_ROBUST = 1 << 2
_BUFFER_TYPE_INDEX, _BUFFER_TYPE_VERTEX = 0, 1
_FORMAT_UINT3, _FORMAT_FLOAT3 = 0x5003, 0x9003
_INVALID_GEOMETRY_ID = 0xFFFFFFFF
#: Lanes of the packet ``RTCRayHitN`` up to the hit's geomID, in fields of N lanes: the ray's org_x,
#: org_y, org_z, tnear, dir_x, dir_y, dir_z, time, tfar, mask, id, flags, then the hit's Ng_x, Ng_y,
#: Ng_z, u, v, primID, geomID; the instance ids follow (Embree writes them: the buffer is made larger).
_F_TFAR, _F_MASK, _F_PRIM, _F_GEOM = 8, 9, 17, 18
_PACKET_FIELDS_ALLOCATED = 24


class _TriangleScene:
    """A committed Embree scene of one triangle geometry; released with the object."""

    def __init__(self, api: _Embree, vertices: Array, faces: NDArray[np.int64]) -> None:
        lib = api.lib
        self.handle = lib.rtcNewScene(api.device)
        # watertight: a ray through the edge two triangles share hits one of them (a cylinder's side seen
        # along a seam was missed by the packet traversal's faster, non-robust test)
        lib.rtcSetSceneFlags(self.handle, _SCENE_FLAG_ROBUST)
        geometry = lib.rtcNewGeometry(api.device, _GEOMETRY_TYPE_TRIANGLE)
        vb = lib.rtcSetNewGeometryBuffer(geometry, _BUFFER_TYPE_VERTEX, 0, _FORMAT_FLOAT3, 12, len(vertices))
        ib = lib.rtcSetNewGeometryBuffer(geometry, _BUFFER_TYPE_INDEX, 0, _FORMAT_UINT3, 12, len(faces))
        if not vb or not ib:
            lib.rtcReleaseGeometry(geometry)
            lib.rtcReleaseScene(self.handle)
            raise RuntimeError(f"Embree could not allocate the mesh buffers (error {api.error()})")
        # (the copies are named: an address taken from a temporary array would outlive the array)
        vertices32 = np.ascontiguousarray(vertices, np.float32)
        faces32 = np.ascontiguousarray(faces, np.uint32)
        ctypes.memmove(vb, vertices32.ctypes.data, vertices32.nbytes)
        ctypes.memmove(ib, faces32.ctypes.data, faces32.nbytes)
        lib.rtcCommitGeometry(geometry)
        lib.rtcAttachGeometry(self.handle, geometry)
        lib.rtcReleaseGeometry(geometry)
        lib.rtcCommitScene(self.handle)
        error = api.error()
        weakref.finalize(self, lib.rtcReleaseScene, self.handle)
        if error:
            raise RuntimeError(f"Embree could not build the scene's BVH (error {error})")


class _Embree:
    """The Embree 4 library inside the embreex wheel: its device, the functions used, the packet kernel."""

    def __init__(self) -> None:
        import embreex.rtcore_scene  # loads the library into the process

        found = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(embreex.__file__)),
                                              "embreex.libs", "libembree4*.so*")))
        name = found[0] if found else ctypes.util.find_library("embree4")
        if not name:
            raise RuntimeError("the Embree 4 library was not found (it comes with the embreex package, "
                               "env/constraints-*.txt)")
        lib = ctypes.CDLL(name)
        handle, u32, size = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t  # pointers as 64-bit ints
        for fname, restype, argtypes in (
                ("rtcNewDevice", handle, [ctypes.c_char_p]),
                ("rtcReleaseDevice", None, [handle]),
                ("rtcGetDeviceError", ctypes.c_int, [handle]),
                ("rtcGetDeviceProperty", ctypes.c_ssize_t, [handle, ctypes.c_int]),
                ("rtcNewScene", handle, [handle]),
                ("rtcReleaseScene", None, [handle]),
                ("rtcCommitScene", None, [handle]),
                ("rtcSetSceneFlags", None, [handle, ctypes.c_int]),
                ("rtcNewGeometry", handle, [handle, ctypes.c_int]),
                ("rtcSetNewGeometryBuffer", handle, [handle, ctypes.c_int, u32, ctypes.c_int, size, size]),
                ("rtcCommitGeometry", None, [handle]),
                ("rtcAttachGeometry", u32, [handle, handle]),
                ("rtcReleaseGeometry", None, [handle]),
                *((f"rtcIntersect{n}", None, [handle, handle, handle, handle]) for n in (4, 8, 16))):
            function = getattr(lib, fname)
            function.restype, function.argtypes = restype, argtypes
        self.lib = lib
        # one thread: the BVH of a scene is built in milliseconds, and a node must not start a thread pool
        self.device = lib.rtcNewDevice(b"threads=1")
        if not self.device:
            raise RuntimeError(f"Embree could not create a device ({name})")
        major = lib.rtcGetDeviceProperty(self.device, _DEVICE_PROPERTY_VERSION_MAJOR)
        if major != 4:
            raise RuntimeError(f"{name} is Embree {major}, this binding is written for Embree 4")
        widths = [n for n in (16, 8, 4)
                  if lib.rtcGetDeviceProperty(self.device, _DEVICE_PROPERTY_NATIVE_RAY_SUPPORTED[n])]
        if not widths:
            raise RuntimeError(f"{name} was built without ray packets")
        self.packet_width = widths[0]
        self.intersect = foreign_function(getattr(lib, f"rtcIntersect{self.packet_width}"), _INTERSECT_SIG)

    def error(self) -> int:
        return int(self.lib.rtcGetDeviceError(self.device))

    def triangle_scene(self, vertices: Array, faces: NDArray[np.int64]) -> _TriangleScene:
        return _TriangleScene(self, vertices, faces)

    def cast(self, scene: _TriangleScene, origins: Array, directions: Array, offset: Array, far_m: float,
             face_normals: Array, range_out: Array, face_out: NDArray[np.int64], normal_out: Array) -> int:
        """``_cast_packets`` through this library's packet query; returns the number of hits."""
        return int(_cast_packets(self.intersect, self.packet_width, scene.handle, origins, directions, offset,
                                 far_m, face_normals, range_out, face_out, normal_out))


@functools.cache
def embree() -> _Embree:
    """The process's Embree library and device (one for every caster)."""
    return _Embree()


#: ``rtcIntersect<N>(valid, scene, rayhit, args)``, pointers as 64-bit integers (user-space addresses
#: are below 2^63, and the integers are passed as the pointers are).
_INTERSECT_SIG = "void(int64, int64, int64, int64)"


@njit(f"int64(FunctionType({_INTERSECT_SIG}), int64, int64, {F8_2D_IN}, {F8_2D_IN}, {F8_1D_IN}, float64, "
      f"{F8_2D_IN}, float64[::1], int64[::1], float64[:, ::1])")
def _cast_packets(intersect, n_lanes, scene, origins, directions, offset, far_m, face_normals, range_out,
                  face_out, normal_out):
    """Trace rays from ``origins`` (M, 3) along unit ``directions`` (M, 3) (minus ``offset``) up to
    ``far_m`` in packets of ``n_lanes`` through ``intersect`` (``rtcIntersect<n_lanes>``) in ``scene``;
    write each ray's range [m], face and unit normal (of ``face_normals``) turned to face the ray. The
    outputs keep what they hold (+inf, NO_HIT, zeros) where nothing is hit. Returns the number of hits."""
    floats = _PACKET_FIELDS_ALLOCATED * n_lanes
    f_tfar, f_mask = _F_TFAR * n_lanes, _F_MASK * n_lanes
    f_prim, f_geom = _F_PRIM * n_lanes, _F_GEOM * n_lanes
    # the packet and its validity mask, aligned to 64 bytes as Embree requires
    raw = np.zeros(floats + 16, np.float32)
    start = (16 - (raw.ctypes.data // 4) % 16) % 16
    packet = raw[start:start + floats]
    lanes = packet.view(np.uint32)
    raw_valid = np.zeros(n_lanes + 16, np.int32)
    start = (16 - (raw_valid.ctypes.data // 4) % 16) % 16
    valid = raw_valid[start:start + n_lanes]
    far = np.float32(far_m)
    m = origins.shape[0]
    hits = 0
    for first in range(0, m, n_lanes):
        count = min(n_lanes, m - first)
        for k in range(n_lanes):
            if k < count:
                i = first + k
                for axis in range(3):
                    packet[axis * n_lanes + k] = origins[i, axis] - offset[axis]
                    packet[(4 + axis) * n_lanes + k] = directions[i, axis]
                packet[3 * n_lanes + k] = 0.0  # tnear
                packet[7 * n_lanes + k] = 0.0  # time
                packet[f_tfar + k] = far
                lanes[f_mask + k] = 0xFFFFFFFF
                lanes[f_mask + n_lanes + k] = 0  # id
                lanes[f_mask + 2 * n_lanes + k] = 0  # flags
                lanes[f_geom + k] = _INVALID_GEOMETRY_ID
                valid[k] = -1
            else:
                valid[k] = 0
        intersect(np.int64(valid.ctypes.data), scene, np.int64(packet.ctypes.data), np.int64(0))
        for k in range(count):
            if lanes[f_geom + k] == _INVALID_GEOMETRY_ID:
                continue  # the outputs' defaults: no hit
            i = first + k
            hits += 1
            f = np.int64(lanes[f_prim + k])
            range_out[i] = packet[f_tfar + k]
            face_out[i] = f
            n0, n1, n2 = face_normals[f, 0], face_normals[f, 1], face_normals[f, 2]
            if n0 * directions[i, 0] + n1 * directions[i, 1] + n2 * directions[i, 2] > 0.0:
                n0, n1, n2 = -n0, -n1, -n2
            normal_out[i, 0], normal_out[i, 1], normal_out[i, 2] = n0, n1, n2
    return hits


def _unit_normals(tri: Array) -> Array:
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    length = np.linalg.norm(n, axis=1)
    return n / np.where(length > 0.0, length, 1.0)[:, None]
