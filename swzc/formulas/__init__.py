"""Formulas: the swizzles' one definition as C++, and the prover that shows each is a permutation."""
