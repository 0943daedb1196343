"""Sensors: AHARS (accelerometer, gyroscope, orientation estimator, altimeter), GPS (space segment and
receivers), the camera with its person classifier and the plume sensor; each vectorised over vehicles."""
