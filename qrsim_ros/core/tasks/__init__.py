"""Task rules (placement, actions, rewards, termination: spec section 5) and the plume rewards."""
