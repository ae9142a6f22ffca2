"""The reductions exercise (lessons 03 and 07): its files, the same in every exercise's folder."""
