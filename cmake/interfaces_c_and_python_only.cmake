# Included by every interface package of this repository (qrsim_ros, env/ros_pkgs/tf2_msgs) before
# rosidl_generate_interfaces. A Python-only environment (the pip bootstrap, env/bootstrap.sh) needs no C++
# code for the interfaces: with this option the C++ generators and type supports are left out, a third
# of the build's compiling. Off by default: a ROS 2 workspace's build still generates C++ for C++ nodes.
option(QRSIM_INTERFACES_C_AND_PYTHON_ONLY "generate only the interfaces' C and Python code (no C++)" OFF)
if(QRSIM_INTERFACES_C_AND_PYTHON_ONLY)
  list(FILTER AMENT_EXTENSIONS_rosidl_generate_idl_interfaces EXCLUDE REGEX "^[a-z_]+_cpp:")
endif()
