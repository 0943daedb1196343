"""Gymnasium environments of the QRSim task families, registered on import (docs/GYM.md).

    import gymnasium, qrsim_ros.gym
    env = gymnasium.make("qrsim_ros/SearchRescue-v0", scenario="search_rescue_2b")
    obs, info = env.reset(seed=0)

Ids (``scenario`` selects the variant; spaces are documented in ``qrsim_ros.gym.envs``):

- ``qrsim_ros/SearchRescue-v0``: search_rescue_2a (default) .. search_rescue_2d
- ``qrsim_ros/Plume-v0``: plume_3a (default) .. plume_3g
- ``qrsim_ros/CatsMouse-v0``: cats_mouse_1a (default) .. cats_mouse_1c
- ``qrsim_ros/KeepSpot-v0``: keep_spot (default), keep_spot_x10, goto_waypoint, keep_velocity
- ``qrsim_ros/GotoWaypoint-v0``, ``qrsim_ros/KeepVelocity-v0``: the generic class with those defaults

Needs the ``gymnasium`` package.
"""

from __future__ import annotations

import gymnasium

from qrsim_ros.gym.envs import (
    INVALID_SENTINEL,
    CatsMouseEnv,
    GenericEnv,
    PlumeEnv,
    QRSimEnv,
    SearchRescueEnv,
)

#: id -> (entry point, default kwargs)
ENV_IDS: dict[str, tuple[str, dict[str, str]]] = {
    "qrsim_ros/SearchRescue-v0": ("qrsim_ros.gym.envs:SearchRescueEnv", {}),
    "qrsim_ros/Plume-v0": ("qrsim_ros.gym.envs:PlumeEnv", {}),
    "qrsim_ros/CatsMouse-v0": ("qrsim_ros.gym.envs:CatsMouseEnv", {}),
    "qrsim_ros/KeepSpot-v0": ("qrsim_ros.gym.envs:GenericEnv", {}),
    "qrsim_ros/GotoWaypoint-v0": ("qrsim_ros.gym.envs:GenericEnv", {"scenario": "goto_waypoint"}),
    "qrsim_ros/KeepVelocity-v0": ("qrsim_ros.gym.envs:GenericEnv", {"scenario": "keep_velocity"}),
}


def register_envs() -> None:
    """Register ENV_IDS with gymnasium (idempotent). The simulator ends its episodes itself, so no
    TimeLimit wrapper is added."""
    for env_id, (entry_point, kwargs) in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point, kwargs=dict(kwargs))


register_envs()

__all__ = [
    "ENV_IDS",
    "INVALID_SENTINEL",
    "CatsMouseEnv",
    "GenericEnv",
    "PlumeEnv",
    "QRSimEnv",
    "SearchRescueEnv",
    "register_envs",
]
