"""The lab: the work that takes the reference kernels to the roofline on one GPU (an H200), and
the record of every experiment behind them. A learner needs none of it; see lab/README.md."""
