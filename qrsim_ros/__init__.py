"""qrsim_ros: the QRSim multi-quadrotor simulator rebuilt for ROS 2.

``qrsim_ros.core`` is pure numpy/scipy (no rclpy) and runs anywhere; ``qrsim_ros.nodes`` are thin
rclpy adapters over it. The generated message modules (``qrsim_ros.msg``, ``qrsim_ros.srv``) exist
only in a colcon build.
"""

__version__ = "0.1.0"
