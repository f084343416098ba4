"""onestack: turns the stack's data (environments/*.yaml) into Spack
configuration, a published Lmod tree, and checks of both."""
