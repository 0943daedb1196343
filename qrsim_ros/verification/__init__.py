"""Probabilistic model checking of a batch's mission (``qrsim verify``; docs/VERIFICATION.md).

A batch directory's mode-transition counts and per-mode times become an abstract model of the mission:
a DTMC over the modes (maximum-likelihood transition probabilities, mean sojourn times as the "time"
reward) and an MDP whose nondeterministic choices range over the transition probabilities' confidence
intervals (the paper's section 7 abstraction: Pmin / Pmax, Rmin / Rmax). Both are written in the PRISM
language and checked with Storm (stormpy), beside the Monte Carlo estimates of the same runs.

Modules: ``formats`` (the batch files and their readers), ``abstraction`` (the chain and its intervals),
``prism`` (PRISM language text), ``storm`` (the only stormpy user), ``estimates`` (Monte Carlo),
``compare`` (the two side by side) and ``records`` (for the batch writer: mode sequences into the files).
"""
