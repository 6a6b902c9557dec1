"""The installs of SUPERFLUID_HOME: staging, publishing, the install mutex, steps, gc and restore."""
