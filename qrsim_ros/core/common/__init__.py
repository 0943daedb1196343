"""What every model shares: frames and geodesy, named random streams and noise processes, the tick and
parameter checks, and the optional numba compilation."""
