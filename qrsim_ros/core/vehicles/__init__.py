"""Vehicles: the identified Pelican model (vectorised over a fleet), QRSim's flight controllers and the
fleet-level control and estimated state the two front ends share."""
