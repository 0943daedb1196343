"""Process supervision shared by every launcher of the simulator (``qrsim launch``, the ROS launch files'
exit handling, scripts/soak.py and the graph tests): the named exit statuses and what a process's exit
means for its run (``exits``), and child processes in their own process group, stopped by escalating
signals and always reaped (``process_group``), and a launcher's own rclpy node watching the graph
(``probe``; rclpy is imported only when one is made: the rest is used before any node runs).
"""
