"""qrsim_ros: the QRSim multi-quadrotor simulator rebuilt for ROS 2.

``qrsim_ros.core`` is pure numpy/scipy (no rclpy) and runs anywhere; ``qrsim_ros.nodes`` are thin
rclpy adapters over it. The generated message modules (``qrsim_ros.msg``, ``qrsim_ros.srv``) exist
only in a colcon build.
"""

from pkgutil import extend_path

# The colcon install holds the generated msg/ and srv/ next to (symlinks of) these sources; when the
# source tree comes first on sys.path (python run from the repository root) they are still found.
__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
