"""Command-line tools of qrsim_ros (pure Python; no rclpy)."""
