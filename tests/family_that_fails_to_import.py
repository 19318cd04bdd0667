"""A pattern module whose import raises, to test that a broken family cannot break a compile."""

raise ImportError("this family is broken on purpose")
