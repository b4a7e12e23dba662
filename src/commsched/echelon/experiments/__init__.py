"""EchelonFlow experiment drivers (core facts, cluster evaluation, FB2010 replay, live)."""
