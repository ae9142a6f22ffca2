"""The attention backward exercise (lesson 14): its files, the same in every exercise's folder."""
