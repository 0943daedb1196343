"""The search-and-retrieve mission's autonomous guidance (ireland_2016 section 5), pure and ROS-free."""
