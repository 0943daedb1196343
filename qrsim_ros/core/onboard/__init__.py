"""The vehicle's onboard autopilot: flight modes, arming and its checks, and each mode's set points.

What a PX4 flight stack does above its controllers, for the MAVLink front ends (docs/MAVLINK.md): the
mode state machine (``modes``), the parameter table by PX4 names (``parameters``), the mission items
(``mission``) and the autopilot that turns them into velocity set points for ``FleetControl``
(``autopilot``). Pure numpy, vectorised over vehicles; nothing here knows of MAVLink's wire format.
"""
