"""The online softmax workshop (A1): its files, the same in every exercise's folder."""
