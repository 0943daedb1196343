"""ROS message conversions of the registered sensor models (``core.sensors.registry``), one module each.

A conversion module defines ``MESSAGE_TYPE`` (the message class), ``TOPIC`` (relative to ``uavN/``),
``messages(model, params, stamp, vehicles) -> [(vehicle index, message), ...]`` for the vehicles that
reported the tick, and optionally ``static_transforms(num_vehicles, stamp, params)`` for the sensor's
mount. A sensor with several topics defines ``publications(params) -> {key: (message class, topic)}``
instead of ``MESSAGE_TYPE`` and ``TOPIC``, and its ``messages`` returns ``(vehicle index, key, message)``.
"""
