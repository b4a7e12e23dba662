"""commsched.echelon.experiments."""
