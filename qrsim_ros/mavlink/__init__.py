"""MAVLink for qrsim_ros vehicles: each vehicle speaks MAVLink 2 as a PX4 vehicle does (docs/MAVLINK.md).

A thin adapter over ``core.onboard``: ``px4`` maps the flight modes to PX4's custom modes, ``link`` is
one UDP endpoint (parsing, counting and dropping bad input), ``vehicles`` turns commands, set points,
missions and parameters into the onboard autopilot's calls and its state into PX4's telemetry streams.
Messages are packed and parsed by pymavlink (its MAVLink 2 ``common`` dialect).
"""
