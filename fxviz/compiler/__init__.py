"""torch.compile from the inside: dynamo's graphs, AOT's parts, inductor's kernels."""
