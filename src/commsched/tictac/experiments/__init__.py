"""commsched.tictac.experiments."""
