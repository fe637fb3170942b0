"""Whether a step still computes what the model did: the output check, its random inputs and scope, per-node numerics and memory."""
