"""PACE (Bao, Peng, Chen, Wu; INFOCOM 2020): preemptive all-reduce scheduling and fusion.

* :mod:`commsched.pace.model`: the model of Sec. IV-A (window, ready times by Lemma 1,
  tails by Theorem 1, time slots, all-reduce cost);
* :mod:`commsched.pace.schedule`: the exact optimal preemptive schedule (largest tail
  first), a brute force for tiny problems, the schedule validator;
* :mod:`commsched.pace.lp`: the paper's LP (14) and a numerically sound LP (HiGHS);
* :mod:`commsched.pace.fusion`: balanced tensor fusion (Sec. V, Alg. 1) and the plan;
* :mod:`commsched.pace.plan`: the all-reduce plan format that the simulator and the live
  enforcement layer execute.
"""
