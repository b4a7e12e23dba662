"""PACE (Bao, Peng, Chen, Wu; INFOCOM 2020): preemptive all-reduce scheduling and fusion.

:mod:`commsched.pace.plan` is the all-reduce plan format that the simulator and the live
enforcement layer execute.
"""
