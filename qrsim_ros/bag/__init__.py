"""rosbag2 bags of qrsim_ros runs: message types, recording and reading (uses ``rosbags``, no rclpy)."""
