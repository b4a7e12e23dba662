"""commsched.placement.experiments."""
