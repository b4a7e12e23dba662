"""commsched.model."""
