"""Runtime ops that pattern families insert into graphs (custom ops with fake implementations)."""
