"""commsched.tictac.live."""
