"""commsched.pace.experiments."""
