"""Correct implementations written in another library's idiom: each must pass every claim it reaches."""
