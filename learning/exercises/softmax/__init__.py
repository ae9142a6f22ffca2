"""The softmax exercise (lessons 04 and 08): its files, the same in every exercise's folder."""
