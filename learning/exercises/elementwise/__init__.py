"""The elementwise exercise (lessons 01 and 06): its files, the same in every exercise's folder."""
