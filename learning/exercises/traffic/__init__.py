"""The traffic exercise (lesson 02): its files, the same in every exercise's folder."""
