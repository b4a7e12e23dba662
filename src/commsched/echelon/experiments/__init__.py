"""EchelonFlow experiment drivers."""
