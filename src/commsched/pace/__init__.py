"""PACE (Bao, Peng, Chen, Wu; INFOCOM 2020): preemptive all-reduce scheduling and fusion.

* :mod:`commsched.pace.model`: the model of Sec. IV-A (window, ready times by Lemma 1,
  tails by Theorem 1); :mod:`commsched.pace.slots`: the model in time slots;
* :mod:`commsched.pace.schedule`: the exact optimal preemptive schedule (largest tail
  first), a brute force for tiny problems, the schedule validator, the paper's ``alpha``;
* :mod:`commsched.pace.lp`: the paper's LP (14), its lexicographic objective as a
  sequence of LPs, a numerically sound LP (HiGHS) and the registry ``SLOT_SOLVERS``;
* :mod:`commsched.pace.fusion`: balanced tensor fusion (Sec. V, Alg. 1) and the plan;
* :mod:`commsched.pace.plan`: the all-reduce plan format that the simulator and the live
  enforcement layer execute;
* :mod:`commsched.pace.sim`: the all-reduce simulator (:mod:`~commsched.pace.plangraph`
  inserts a plan into the iteration's op graph, :mod:`~commsched.pace.planrun` is the
  result);
* :mod:`commsched.pace.baselines` (WFBP, TicTac, P3), :mod:`commsched.pace.dynamic`
  (Horovod, PyTorch DDP, ByteScheduler) and :mod:`commsched.pace.policies` (PACE, its
  ablations, the registry ``POLICIES``): the all-reduce policies;
* :mod:`commsched.pace.live`: the policies in PyTorch data-parallel training;
* :mod:`commsched.pace.experiments`: the drivers of the Snakemake rules
  (``workflow/rules/pace.smk``).
"""
