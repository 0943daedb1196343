"""pip installation of the pure-Python part of qrsim_ros (core models and the qrsim CLI).

For users without ROS: ``pip install .`` gives ``qrsim_ros.core`` (numpy/scipy/pyproj) and the
``qrsim`` command's ROS-free subcommands. The ROS 2 package (messages, nodes, launch files) is built
with colcon from package.xml/CMakeLists.txt; see README.md.
"""

from pathlib import Path

from setuptools import find_packages, setup

setup(
    name="qrsim_ros",
    version="0.1.0",
    description="QRSim quadrotor simulator models (identified AscTec Pelican, sensors, tasks) for ROS 2",
    long_description=(Path(__file__).parent / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    python_requires=">=3.10",
    packages=find_packages(include=["qrsim_ros", "qrsim_ros.*"]),
    install_requires=["numpy>=1.24", "numba>=0.60", "scipy>=1.10", "pyproj>=3.4", "PyYAML>=6"],
    extras_require={"plots": ["matplotlib>=3.6"], "bags": ["rosbags>=0.10"], "gym": ["gymnasium>=1.0"],
                    "batch": ["dask[distributed]>=2024.1", "matplotlib>=3.6"]},
    entry_points={"console_scripts": ["qrsim=qrsim_ros.cli.main:main"]},
)
