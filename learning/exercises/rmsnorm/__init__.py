"""The RMSNorm exercise (lessons 05 and 09): its files, the same in every exercise's folder."""
