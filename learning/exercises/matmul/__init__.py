"""The matmul exercise (lesson 12): its files, the same in every exercise's folder."""
