"""The world around the vehicles: mean wind and turbulence, the flight area with terrain and persons,
and the gas plumes."""
