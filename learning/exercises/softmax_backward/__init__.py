"""The softmax backward exercise (lesson 11): its files, the same in every exercise's folder."""
