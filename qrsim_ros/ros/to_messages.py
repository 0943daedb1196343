"""Core arrays -> messages: ground truth, transforms and sensor outputs at the ROS boundary.

The core keeps QRSim's state ``X`` (N, 13) = [px py pz (NED, m)  phi theta psi (ZYX, rad)  u v w (FRD,
m/s)  p q r (FRD, rad/s)  thrust (N)]. The nodes publish it as

- ``nav_msgs/Odometry`` ``map`` -> ``uavN/base_link``: pose = position in ENU and the attitude of the
  FLU body in ENU (quaternion x, y, z, w); twist in the *child* frame (nav_msgs convention, REP-105):
  body FLU linear velocity and body FLU rates. Covariances are zero (ground truth).
- ``geometry_msgs/AccelStamped`` in ``uavN/base_link``: the body specific force in FLU (REP-145: +9.81
  on z at rest), i.e. QRSim's ``a`` (``PelicanFleet.accel_body``, FRD) with y and z negated; the
  angular part is zero (the core does not expose the angular acceleration).
- ``geometry_msgs/TransformStamped`` ``map`` -> ``uavN/base_link`` for /tf, and the static frames;
- ``sensor_msgs/BatteryState`` of each pack (``battery_state_message``, ``fill_battery_state``);
- qrsim_ros/ActiveFaults of the active faults (``active_faults_message``, /sim/faults);
- the sensors' messages (``*_message``): sensor_msgs/Imu, NavSatFix, TwistStamped, PointCloud2 and
  qrsim_ros Altitude and Concentration, stamped with the tick's time t_k.

Every rotation comes from ``qrsim_ros.core.common.frames``; the way back is ``from_messages``.
"""

from __future__ import annotations

import array
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import yaml
from builtin_interfaces.msg import Time
from geometry_msgs.msg import AccelStamped, TransformStamped
from nav_msgs.msg import Odometry
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import (
    R_ENU_NED,
    R_FLU_FRD,
    Array,
    dcm_ned_to_body,
    euler_ned_frd_to_quaternion_enu_flu,
    frd_to_flu,
    ned_to_enu,
    rotation_matrix_to_quaternion,
)
from qrsim_ros.core.faults import ActiveFault
from qrsim_ros.core.sensors.camera import CameraObservation
from qrsim_ros.core.vehicles.pelican import (
    STATE_EULER,
    STATE_POSITION_NED,
    STATE_RATES_FRD,
    STATE_VELOCITY_FRD,
)
from qrsim_ros.ros.names import (
    MAP_FRAME,
    MAP_NED_FRAME,
    base_link_frame,
    base_link_frd_frame,
    camera_optical_frame,
    vehicle_namespace,
)


def float64_array(values: ArrayLike) -> array.array:
    """A float64[] message field from any array, row-major (assigning ``array('d')`` skips rclpy's
    per-element type check)."""
    return _typed_array("d", np.float64, values)


def float32_array(values: ArrayLike) -> array.array:
    """A float32[] message field from any array, row-major (as ``float64_array``)."""
    return _typed_array("f", np.float32, values)


def uint32_array(values: ArrayLike) -> array.array:
    """A uint32[] message field from any array of non-negative integers (as ``float64_array``)."""
    return _typed_array("I", np.uint32, values)


def _typed_array(code: str, dtype: type, values: ArrayLike) -> array.array:
    out = array.array(code)
    out.frombytes(np.ascontiguousarray(values, dtype=dtype).tobytes())
    return out


def quaternions_enu_flu(x: ArrayLike) -> Array:
    """Quaternions (N, 4) (x, y, z, w) of the FLU bodies in ENU for states (N, >=6); NaN rows for
    non-finite attitudes (a vehicle frozen in a diverged state)."""
    x = np.atleast_2d(np.asarray(x, float))
    q = np.full((x.shape[0], 4), np.nan)
    ok = np.all(np.isfinite(x[:, STATE_EULER]), axis=1)
    if ok.any():
        q[ok] = euler_ned_frd_to_quaternion_enu_flu(*x[ok, STATE_EULER].T)
    return q


def odometry_message(index: int) -> Odometry:
    """An Odometry with vehicle ``index``'s frame ids, to be filled by ``fill_odometry`` every tick."""
    msg = Odometry()
    msg.header.frame_id = MAP_FRAME
    msg.child_frame_id = base_link_frame(index)
    return msg


def fill_odometry(msg: Odometry, x: ArrayLike, q_xyzw: ArrayLike, stamp: Time) -> Odometry:
    """Fill ``msg`` from one true state x (13,) (NED/FRD) and its quaternion (4,) (``quaternions_enu_flu``).

    Pose: ENU position, FLU-in-ENU attitude. Twist (child frame base_link): FLU body velocity and rates.
    """
    x = np.asarray(x, float)
    p = ned_to_enu(x[STATE_POSITION_NED])
    v = frd_to_flu(x[STATE_VELOCITY_FRD])
    w = frd_to_flu(x[STATE_RATES_FRD])
    msg.header.stamp = stamp
    pose = msg.pose.pose
    pose.position.x, pose.position.y, pose.position.z = float(p[0]), float(p[1]), float(p[2])
    o = pose.orientation
    o.x, o.y, o.z, o.w = (float(c) for c in q_xyzw)
    t = msg.twist.twist
    t.linear.x, t.linear.y, t.linear.z = float(v[0]), float(v[1]), float(v[2])
    t.angular.x, t.angular.y, t.angular.z = float(w[0]), float(w[1]), float(w[2])
    return msg


def fill_ground_truth(odom: Sequence[Odometry], accel: Sequence[AccelStamped],
                      transforms: Sequence[TransformStamped] | None, x: ArrayLike, a_frd: ArrayLike,
                      stamp: Time) -> None:
    """Fill one tick's messages of every vehicle from the true states x (N, 13) and the specific forces
    a (N, 3) (FRD): ``fill_odometry``, ``fill_accel`` and ``fill_transform`` with the conversions done
    once for the whole fleet. ``transforms``: the map -> base_link transforms, or None."""
    x = np.atleast_2d(np.asarray(x, float))
    q = quaternions_enu_flu(x).tolist()
    p = ned_to_enu(x[:, STATE_POSITION_NED]).tolist()
    v = frd_to_flu(x[:, STATE_VELOCITY_FRD]).tolist()
    w = frd_to_flu(x[:, STATE_RATES_FRD]).tolist()
    f = frd_to_flu(np.asarray(a_frd, float)).tolist()
    for i, m in enumerate(odom):
        m.header.stamp = stamp
        pose = m.pose.pose
        pose.position.x, pose.position.y, pose.position.z = p[i]
        o = pose.orientation
        o.x, o.y, o.z, o.w = q[i]
        t = m.twist.twist
        t.linear.x, t.linear.y, t.linear.z = v[i]
        t.angular.x, t.angular.y, t.angular.z = w[i]
        am = accel[i]
        am.header.stamp = stamp
        lin = am.accel.linear
        lin.x, lin.y, lin.z = f[i]
        if transforms is not None:
            tf = transforms[i]
            tf.header.stamp = stamp
            tr = tf.transform.translation
            tr.x, tr.y, tr.z = p[i]
            r = tf.transform.rotation
            r.x, r.y, r.z, r.w = q[i]


def odometry_from_state(index: int, x: ArrayLike, stamp: Time) -> Odometry:
    """nav_msgs/Odometry of vehicle ``index`` from its true state x (13,) (see the module doc)."""
    x = np.asarray(x, float)
    return fill_odometry(odometry_message(index), x, quaternions_enu_flu(x[None, :])[0], stamp)


def accel_message(index: int) -> AccelStamped:
    """An AccelStamped in vehicle ``index``'s base_link, to be filled by ``fill_accel``."""
    msg = AccelStamped()
    msg.header.frame_id = base_link_frame(index)
    return msg


def fill_accel(msg: AccelStamped, a_frd: ArrayLike, stamp: Time) -> AccelStamped:
    """Fill ``msg`` with the body specific force a (3,) FRD [m/s^2] (QRSim's ``a``), converted to FLU."""
    f = frd_to_flu(np.asarray(a_frd, float))
    msg.header.stamp = stamp
    lin = msg.accel.linear
    lin.x, lin.y, lin.z = float(f[0]), float(f[1]), float(f[2])
    return msg


def transform(parent: str, child: str, translation: ArrayLike, q_xyzw: ArrayLike, stamp: Time
              ) -> TransformStamped:
    """A TransformStamped parent -> child: the child's origin and attitude expressed in the parent."""
    t = TransformStamped()
    t.header.frame_id = parent
    t.header.stamp = stamp
    t.child_frame_id = child
    tr = t.transform.translation
    tr.x, tr.y, tr.z = (float(c) for c in np.asarray(translation, float))
    r = t.transform.rotation
    r.x, r.y, r.z, r.w = (float(c) for c in np.asarray(q_xyzw, float))
    return t


def fill_transform(t: TransformStamped, x: ArrayLike, q_xyzw: ArrayLike, stamp: Time) -> TransformStamped:
    """Fill a ``map`` -> ``uavN/base_link`` transform from a true state x (13,) and its quaternion."""
    p = ned_to_enu(np.asarray(x, float)[STATE_POSITION_NED])
    t.header.stamp = stamp
    tr = t.transform.translation
    tr.x, tr.y, tr.z = float(p[0]), float(p[1]), float(p[2])
    r = t.transform.rotation
    r.x, r.y, r.z, r.w = (float(c) for c in q_xyzw)
    return t



def static_transforms(num_vehicles: int, camera_r_body_rad: ArrayLike, stamp: Time) -> list[TransformStamped]:
    """/tf_static: ``map`` -> ``map_ned``; per vehicle ``base_link`` -> ``base_link_frd`` and
    ``base_link`` -> ``camera_optical``.

    The camera is mounted with QRSim's Euler angles r (``camera_geometry.camera_rotation``: body FRD ->
    camera, optical axis camera z, image u along camera x and v along camera y, i.e. the REP-103
    optical convention); the camera's axes in FLU are ``R_flu_frd @ R_cb^T``.
    """
    r = np.asarray(camera_r_body_rad, float)
    r_cb = dcm_ned_to_body(r[0], r[1], r[2])  # body FRD -> camera, as camera_geometry.camera_rotation
    q_map_ned = rotation_matrix_to_quaternion(R_ENU_NED)
    q_frd = rotation_matrix_to_quaternion(R_FLU_FRD)
    q_cam = rotation_matrix_to_quaternion(R_FLU_FRD @ r_cb.T)
    out = [transform(MAP_FRAME, MAP_NED_FRAME, np.zeros(3), q_map_ned, stamp)]
    for i in range(num_vehicles):
        out.append(transform(base_link_frame(i), base_link_frd_frame(i), np.zeros(3), q_frd, stamp))
        out.append(transform(base_link_frame(i), camera_optical_frame(i), np.zeros(3), q_cam, stamp))
    return out


def _diag9(values: Sequence[float]) -> Array:
    cov = np.zeros(9)
    cov[0], cov[4], cov[8] = float(values[0]), float(values[1]), float(values[2])
    return cov


def imu_columns(euler_ned_frd: Array, rates_frd: Array, specific_force_frd: Array) -> Array:
    """The values of ``imu/data`` of M vehicles (M, 10), in ``fleet_topics.IMU_COLUMNS``' order: the
    orientation (FLU body in ENU, quaternion x, y, z, w) from the estimator's ZYX Euler angles (M, 3), the
    gyro FRD -> FLU [rad/s] and the accelerometer's specific force FRD -> FLU [m/s^2]."""
    e = np.asarray(euler_ned_frd, float).reshape(-1, 3)
    q = euler_ned_frd_to_quaternion_enu_flu(e[:, 0], e[:, 1], e[:, 2])
    return np.hstack([q, frd_to_flu(np.asarray(rates_frd, float).reshape(-1, 3)),
                      frd_to_flu(np.asarray(specific_force_frd, float).reshape(-1, 3))])


#: float64 values of sensor_msgs/Imu after its header: orientation (4) and its covariance (9), angular
#: velocity (3) and covariance (9), linear acceleration (3) and covariance (9).
IMU_FLOAT64_FIELDS = 37


def imu_float64_block(columns: Array, var_orientation: Array, var_rates: Array, var_accel: Array) -> Array:
    """sensor_msgs/Imu's float64 fields (M, ``IMU_FLOAT64_FIELDS``) of M vehicles, in the message's order
    (REP-145, frame base_link FLU; serialised by ``cdr.HeaderFloat64Messages``), from ``columns``, the rows
    of ``imu_columns``: orientation (FLU body in ENU), angular velocity (FLU) [rad/s], specific force
    (FLU) [m/s^2]. Covariances: diagonal error variances (Euler-angle variances for roll, pitch, yaw)."""
    c = np.asarray(columns, float).reshape(-1, 10)
    block = np.zeros((len(c), IMU_FLOAT64_FIELDS))
    block[:, 0:4], block[:, 13:16], block[:, 25:28] = c[:, 0:4], c[:, 4:7], c[:, 7:10]
    block[:, 4:13], block[:, 16:25], block[:, 28:37] = (_diag9(var_orientation), _diag9(var_rates),
                                                        _diag9(var_accel))
    return block


#: float64 values of qrsim_ros/Altitude after its header: height, vertical speed, height variance.
ALTITUDE_FLOAT64_FIELDS = 3


def altitude_message(stamp: Any, frame: str, height_m: float, vertical_speed_mps: float,
                     height_variance_m2: float) -> Any:
    """qrsim_ros/Altitude: height above ground [m, up], vertical speed [m/s, up], height variance."""
    from qrsim_ros.msg import Altitude

    m = Altitude()
    m.header.stamp = stamp
    m.header.frame_id = frame
    m.height = float(height_m)
    m.vertical_speed = float(vertical_speed_mps)
    m.height_variance = float(height_variance_m2)
    return m


def navsatfix_message(stamp: Any, frame: str, lla: Array, variance_ned_m2: Array, has_fix: bool) -> Any:
    """sensor_msgs/NavSatFix: WGS-84 latitude/longitude [deg], ellipsoidal altitude [m], diagonal ENU
    position covariance [m^2] (east, north, up) from the receiver's NED variances; NO_FIX without a fix."""
    from sensor_msgs.msg import NavSatFix, NavSatStatus

    m = NavSatFix()
    m.header.stamp = stamp
    m.header.frame_id = frame
    m.status.status = NavSatStatus.STATUS_FIX if has_fix else NavSatStatus.STATUS_NO_FIX
    m.status.service = NavSatStatus.SERVICE_GPS
    m.latitude, m.longitude, m.altitude = (float(v) for v in lla)
    var = np.asarray(variance_ned_m2, float)
    if np.all(np.isfinite(var)):
        m.position_covariance = _diag9([var[1], var[0], var[2]])
        m.position_covariance_type = NavSatFix.COVARIANCE_TYPE_DIAGONAL_KNOWN
    else:
        m.position_covariance_type = NavSatFix.COVARIANCE_TYPE_UNKNOWN
    return m


def velocity_message(stamp: Any, frame: str, velocity: Array, enu: bool = False) -> Any:
    """geometry_msgs/TwistStamped: ground velocity in ``frame`` (map, ENU) [m/s] from ``velocity`` in NED
    (or ENU with ``enu``); angular 0."""
    from geometry_msgs.msg import TwistStamped

    m = TwistStamped()
    m.header.stamp = stamp
    m.header.frame_id = frame
    v = np.asarray(velocity, float) if enu else ned_to_enu(np.asarray(velocity, float))
    m.twist.linear.x, m.twist.linear.y, m.twist.linear.z = (float(c) for c in v)
    return m


def concentration_message(stamp: Any, frame: str, concentration: float, variance: float) -> Any:
    """qrsim_ros/Concentration: the plume sensor's reading and its noise variance."""
    from qrsim_ros.msg import Concentration

    m = Concentration()
    m.header.stamp = stamp
    m.header.frame_id = frame
    m.concentration = float(concentration)
    m.variance = float(variance)
    return m


#: Point layout of ``camera/detections``: float32 coordinates in ``map`` (ENU) [m], float32 llkd,
#: int32 terrain class, then the 4 ground corners of the window (core order: (u0, v0), (u0, v1),
#: (u1, v0), (u1, v1) in pixels, i.e. wg columns j(nf2+1)+i + [0, 1, nf2+1, nf2+2]).
DETECTION_DTYPE = np.dtype(
    [("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("llkd", "<f4"), ("terrain_class", "<i4")]
    + [(f"c{c}_{a}", "<f4") for c in range(4) for a in "xyz"]
)


_CORNER_OFFSETS = ((0, 0), (0, 1), (1, 0), (1, 1))  # (dj, di) of the four corners


def point_fields(dtype: np.dtype[Any]) -> list[Any]:
    """sensor_msgs/PointField list of a structured little-endian point dtype (one scalar per field)."""
    from sensor_msgs.msg import PointField

    kinds = {np.dtype("<f4"): PointField.FLOAT32, np.dtype("<f8"): PointField.FLOAT64,
             np.dtype("<i4"): PointField.INT32, np.dtype("<u2"): PointField.UINT16,
             np.dtype("u1"): PointField.UINT8}
    return [PointField(name=name, offset=dtype.fields[name][1], datatype=kinds[dtype.fields[name][0]],
                       count=1) for name in dtype.names]


def structured_cloud(pts: NDArray[np.void], frame: str, stamp: Any, fields: list[Any] | None = None) -> Any:
    """sensor_msgs/PointCloud2 (little endian) of a structured point array: organised (rows x columns)
    when 2-D, one row when 1-D; dense unless a point's x is not finite. ``fields``: ``point_fields`` of
    its dtype (pass them to build them once)."""
    from sensor_msgs.msg import PointCloud2

    m = PointCloud2()
    m.header.stamp = stamp
    m.header.frame_id = frame
    m.height, m.width = (int(pts.shape[0]), int(pts.shape[1])) if pts.ndim == 2 else (1, int(pts.shape[0]))
    m.fields = fields if fields is not None else point_fields(pts.dtype)
    m.is_bigendian = False
    m.point_step = pts.dtype.itemsize
    m.row_step = pts.dtype.itemsize * m.width
    m.data = pts.tobytes()
    m.is_dense = bool(pts.size == 0 or np.all(np.isfinite(pts["x"])))
    return m


def detection_fields() -> list[Any]:
    """sensor_msgs/PointField list matching ``DETECTION_DTYPE``."""
    return point_fields(DETECTION_DTYPE)


def detection_points(obs: CameraObservation | None) -> NDArray[np.void]:
    """The organised point array (rows = nf2 windows along the image v axis, columns = nf1 windows
    along u) of one camera observation; (0, 0) when there is none or it sees no ground.

    Point (row i, column j) is window (j, i) of the core: centre ``centres_ned[j, i]`` in ENU, its llkd
    and terrain class, and its corners. Windows that miss the ground have NaN coordinates and llkd and
    terrain class -1 (the cloud is then not dense). No ground truth (person index) is included.
    """
    if obs is None or obs.empty:
        return np.zeros((0, 0), DETECTION_DTYPE)
    nf1, nf2 = obs.grid_dims
    pts = np.zeros((nf2, nf1), DETECTION_DTYPE)
    centres = ned_to_enu(obs.centres_ned).transpose(1, 0, 2)  # (nf2, nf1, 3)
    pts["x"], pts["y"], pts["z"] = centres[..., 0], centres[..., 1], centres[..., 2]
    pts["llkd"] = obs.llkd_grid.T
    pts["terrain_class"] = obs.terrain_class.T
    corners = ned_to_enu(obs.corners_ned)  # (nf1+1, nf2+1, 3)
    for c, (dj, di) in enumerate(_CORNER_OFFSETS):
        block = corners[dj:dj + nf1, di:di + nf2].transpose(1, 0, 2)
        for a, axis in enumerate("xyz"):
            pts[f"c{c}_{axis}"] = block[..., a]
    return pts


def detections_message(stamp: Any, frame: str, obs: CameraObservation | None, fields: list[Any]) -> Any:
    """sensor_msgs/PointCloud2 (organised, little endian) of one observation (see ``detection_points``)."""
    return structured_cloud(detection_points(obs), frame, stamp, fields)


def battery_state_message(index: int, cells: int, capacity_ah: float, model: str) -> Any:
    """A sensor_msgs/BatteryState template of vehicle ``index``'s pack (``fill_battery_state`` per
    publication): frame ``uavN/base_link``, technology LIPO, present, design capacity and capacity
    ``capacity_ah`` [Ah] (the simulated pack does not age), no temperature (NaN: not measured), health
    GOOD, location ``uavN``, serial number ``uavN-<model>``."""
    from sensor_msgs.msg import BatteryState

    msg = BatteryState()
    msg.header.frame_id = base_link_frame(index)
    msg.power_supply_technology = BatteryState.POWER_SUPPLY_TECHNOLOGY_LIPO
    msg.power_supply_health = BatteryState.POWER_SUPPLY_HEALTH_GOOD
    msg.present = True
    msg.design_capacity = msg.capacity = float(capacity_ah)
    msg.temperature = float("nan")
    msg.cell_voltage = [float("nan")] * cells
    msg.cell_temperature = [float("nan")] * cells
    msg.location = vehicle_namespace(index)
    msg.serial_number = f"{msg.location}-{model}"
    return msg


def fill_battery_state(msg: Any, voltage_v: float, current_a: float, percentage: float, charging: bool,
                       empty: bool, stamp: Time) -> Any:
    """Fill a ``battery_state_message`` with one pack's values (``core.vehicles.energy.FleetEnergy``),
    following sensor_msgs/BatteryState: ``current`` negative while discharging (the core's
    ``current_a`` is positive then), ``charge`` = percentage x capacity [Ah], ``percentage`` 0..1, every
    cell at voltage / cells; status CHARGING (on a base, current flowing in), FULL (on a base, charger
    done), NOT_CHARGING with health DEAD (empty: cut-off reached) or DISCHARGING."""
    from sensor_msgs.msg import BatteryState

    msg.header.stamp = stamp
    msg.voltage = float(voltage_v)
    msg.current = 0.0 - float(current_a)  # (0 A stays +0.0)
    msg.percentage = float(percentage)
    msg.charge = float(percentage) * msg.capacity
    cells = len(msg.cell_voltage)
    msg.cell_voltage = [float(voltage_v) / cells] * cells
    if empty:
        msg.power_supply_status = BatteryState.POWER_SUPPLY_STATUS_NOT_CHARGING
        msg.power_supply_health = BatteryState.POWER_SUPPLY_HEALTH_DEAD
    elif charging:
        msg.power_supply_status = (BatteryState.POWER_SUPPLY_STATUS_CHARGING if current_a < 0
                                   else BatteryState.POWER_SUPPLY_STATUS_FULL)
        msg.power_supply_health = BatteryState.POWER_SUPPLY_HEALTH_GOOD
    else:
        msg.power_supply_status = BatteryState.POWER_SUPPLY_STATUS_DISCHARGING
        msg.power_supply_health = BatteryState.POWER_SUPPLY_HEALTH_GOOD
    return msg


def fault_params_yaml(params: Any) -> str:
    """A fault's parameters (``ActiveFault.params``) as a one-line YAML flow mapping (``"{}"``: none)."""
    plain = {str(k): list(v) if isinstance(v, tuple) else v for k, v in dict(params).items()}
    return yaml.safe_dump(plain, default_flow_style=True, sort_keys=True, width=1 << 16).strip()


def active_fault_messages(active: Sequence[ActiveFault]) -> list[Any]:
    """qrsim_ros/ActiveFault of each active fault (``FaultSchedule.active``): since_s and until_s [s] of
    simulated time within the episode, until_s NaN for a permanent fault."""
    from qrsim_ros.msg import ActiveFault as ActiveFaultMsg

    return [ActiveFaultMsg(id=f.id, vehicle=int(f.vehicle), kind=f.kind,
                           params_yaml=fault_params_yaml(f.params), since_s=float(f.since_s),
                           until_s=math.nan if f.until_s is None else float(f.until_s))
            for f in active]


def active_faults_message(active: Sequence[ActiveFault], stamp: Time, run_id: str, episode: int) -> Any:
    """qrsim_ros/ActiveFaults (/sim/faults) of the active faults (``active_fault_messages``)."""
    from qrsim_ros.msg import ActiveFaults

    msg = ActiveFaults(run_id=run_id, episode=int(episode))
    msg.header.stamp = stamp
    msg.faults = active_fault_messages(active)
    return msg
