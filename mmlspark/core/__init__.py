"""Hand-written foundations shared by the generated wrappers: JVM wrapper bases, sessions."""
