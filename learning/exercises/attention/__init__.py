"""The attention exercise (lesson 13): its files, the same in every exercise's folder."""
