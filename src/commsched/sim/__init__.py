"""Simulators: the multi-resource priority executor and the schedule validator."""

from commsched.sim.priority import Schedule, simulate, simulate_compiled
from commsched.sim.validate import InvalidSchedule, check_schedule

__all__ = ["InvalidSchedule", "Schedule", "check_schedule", "simulate", "simulate_compiled"]
