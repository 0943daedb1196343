"""Pure numerical models of QRSim (numpy/scipy only; never imports rclpy).

Conventions follow the original (spec section 9): world frame NED, body frame FRD, ZYX Euler angles.
Conversion to ROS's ENU/FLU happens once, at the node boundary (``qrsim_ros.core.common.frames``).
"""
