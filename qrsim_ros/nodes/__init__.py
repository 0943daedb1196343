"""The ROS 2 nodes: one module per executable, each a thin adapter (parameters, messages, timing) around
one core component."""
