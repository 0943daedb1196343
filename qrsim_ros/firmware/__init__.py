"""Firmware in the loop: a user's own autopilot firmware flies qrsim_ros physics and sensors through the
simulator interfaces the firmware projects publish (docs/FIRMWARE.md)."""
