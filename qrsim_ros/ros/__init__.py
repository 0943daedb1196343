"""The ROS adapter layer the nodes share: node runner and parameters, names, stamps, QoS, message
conversion in both directions (``to_messages``, ``from_messages``), per-tick ground truth in
(``ground_truth``), the estimated state from sensor topics, visualisation markers, and the
single-process runner. No executables live here (they are in ``qrsim_ros.nodes``)."""
