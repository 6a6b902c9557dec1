"""Host facts: the platform, the C library, shared libraries, ELF, GPUs and what a build needs of them."""
