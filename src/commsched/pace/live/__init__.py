"""commsched.pace.live."""
