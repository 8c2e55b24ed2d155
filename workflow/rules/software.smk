# Software stacks: container images and the per-testbed preflight check.
